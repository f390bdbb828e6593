/**
 * Running npm (a lockfile, `npm ci` from it, `npm pack`) with the npm Sluice depends on ({@link bundledNpmCli}: `node_modules/npm`,
 * pinned in package.json), as `node <npm-cli.js>` with Sluice's own Node, never an `npm` from
 * PATH: the Lambda Node.js runtime has none, and a pinned CLI installs the same way on every
 * machine. On Lambda only /tmp is writable, so npm is given a home of its own there
 * ({@link NpmRun.home}). npm gets Sluice's environment without `AWS_*`, `SLUICE_*` and inherited
 * `npm_*` variables ({@link npmEnvironment}): credentials and the secrets key are none of its
 * business, even though it runs no package code (`--ignore-scripts`).
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { NPM_CLI_PACKAGE } from "#config/shared-names";
import { refusingProxyUrl } from "./refusing-proxy.ts";
import { CHECKOUT_NODE_MODULES } from "./shipped-packages.ts";

/** The CLI's entry inside {@link NPM_CLI_PACKAGE} (the package's `exports` hide it from `require.resolve`). */
const NPM_CLI_ENTRY = join("bin", "npm-cli.js");
/** Longest npm reason kept in an error message. */
const REASON_LENGTH = 300;

/**
 * The npm CLI Sluice depends on, `<nodeModulesDir>/npm/bin/npm-cli.js`: by default the Sluice
 * checkout's; a Lambda function passes its own (`/var/task/node_modules`), which carries npm.
 */
export function bundledNpmCli(nodeModulesDir: string = CHECKOUT_NODE_MODULES): string {
  return join(nodeModulesDir, NPM_CLI_PACKAGE, NPM_CLI_ENTRY);
}

/** How npm is run (the plugin's options, resolved). */
export interface NpmRun {
  /** The CLI's JavaScript entry, run with `process.execPath`. */
  readonly cli: string;
  /** npm's own home, cache and user config; `undefined`: the user's. */
  readonly home: string | undefined;
  readonly registry: string | undefined;
  readonly timeoutMs: number;
}

/** npm's own registry, where no other is configured. */
export const DEFAULT_NPM_REGISTRY = "https://registry.npmjs.org/";

/** What npm's configuration says of the network, per CLI and home: asked once. */
interface NpmNetwork {
  /** The registry npm installs from (an `.npmrc` may name another than the default). */
  registry: string;
  /** Whether npm goes through a proxy of the operator's (its configuration or the environment). */
  ownProxy: boolean;
}

const networks = new Map<string, Promise<NpmNetwork>>();

/** The variables through which npm's agent finds a proxy when its configuration names none. */
const PROXY_VARIABLES = /^(https?_proxy|proxy)$/i;

function npmNetwork(npm: NpmRun): Promise<NpmNetwork> {
  const key = `${npm.cli}\n${npm.home ?? ""}`;
  let network = networks.get(key);
  if (!network) {
    const fromEnvironment = Object.entries(process.env).some(([name, value]) => PROXY_VARIABLES.test(name) && value);
    network = runNpm("config", ["get", "registry", "https-proxy", "proxy"], undefined, npm.home ?? process.cwd(), npm)
      .then((stdout) => {
        const settings = new Map(
          stdout
            .split("\n")
            .map((line) => /^([a-z-]+)=(.*)$/.exec(line.trim()))
            .filter((match): match is RegExpExecArray => match !== null)
            .map((match) => [match[1] as string, (match[2] as string).trim()]),
        );
        const named = settings.get("registry") ?? "";
        const proxied = ["https-proxy", "proxy"].some((name) => !["", "null", undefined].includes(settings.get(name)));
        return {
          registry: /^https?:\/\//.test(named) ? named : DEFAULT_NPM_REGISTRY,
          ownProxy: proxied || fromEnvironment,
        };
      })
      .catch(() => ({ registry: DEFAULT_NPM_REGISTRY, ownProxy: fromEnvironment }));
    networks.set(key, network);
  }
  return network;
}

/** The registry `npm` uses: its `registry` option, or what its configuration says (`npm config get registry`). */
export async function effectiveRegistry(npm: NpmRun): Promise<string> {
  return npm.registry ?? (await npmNetwork(npm)).registry;
}

/**
 * npm's network confined to the registry: every other host goes through {@link refusingProxyUrl},
 * which answers 403. A package's dependency on a tarball URL elsewhere (another server, the
 * server's own private network) makes npm fetch it while it resolves the lockfile, before the
 * lockfile can be checked (package-cache.ts); it now fails there instead of reaching the address.
 * Not when the operator's npm uses a proxy of its own (its configuration or `HTTPS_PROXY`): the
 * registry may be reachable only through it, and what it lets through is the operator's policy.
 */
async function registryOnly(npm: NpmRun): Promise<string[]> {
  const network = await npmNetwork(npm);
  if (network.ownProxy) return [];
  const proxy = await refusingProxyUrl();
  const host = new URL(npm.registry ?? network.registry).hostname;
  return [`--proxy=${proxy}`, `--https-proxy=${proxy}`, `--noproxy=${host}`];
}

/**
 * Resolves `installSpec` into `<prefix>/package.json` and `<prefix>/package-lock.json` from the
 * registry's metadata, downloading no package (`--package-lock-only`); resolves with the lockfile.
 */
export async function runNpmLock(prefix: string, installSpec: string, npm: NpmRun): Promise<string> {
  const confined = await registryOnly(npm);
  await runNpm(
    "install",
    [
      "--prefix",
      prefix,
      "--package-lock-only",
      // Every package's tarball URL in the lockfile (an `.npmrc` may leave the registry's out):
      // what it names is checked before anything is installed (package-cache.ts).
      "--omit-lockfile-registry-resolved=false",
      "--no-audit",
      "--no-fund",
      "--ignore-scripts",
      "--omit=dev",
      ...confined,
    ],
    installSpec,
    prefix,
    npm,
  ).catch((error: unknown) => {
    throw refusedByProxy(error) ?? error;
  });
  return readFile(join(prefix, "package-lock.json"), "utf8");
}

/** npm's 403 from {@link refusingProxyUrl}, said as what it is; undefined for another failure. */
function refusedByProxy(error: unknown): Error | undefined {
  const url = /^E403 .*\bForbidden - GET (\S+)/.exec(error instanceof Error ? error.message : "")?.[1];
  if (url === undefined) return undefined;
  return new Error(
    `a dependency is a tarball outside the registry (${url}); Sluice installs packages from the registry only`,
  );
}

/** Installs exactly `<prefix>/package-lock.json` (`npm ci`), without scripts or dev dependencies. */
export async function runNpmCi(prefix: string, npm: NpmRun): Promise<void> {
  await runNpm(
    "ci",
    ["--prefix", prefix, "--no-audit", "--no-fund", "--ignore-scripts", "--omit=dev", ...(await registryOnly(npm))],
    undefined,
    prefix,
    npm,
  );
}

/**
 * Downloads the tarball of `packageSpec` (`name` or `name@version`) into `destination`, without
 * installing it or running anything (`npm pack`); resolves with the tarball's path.
 */
export async function runNpmPack(packageSpec: string, destination: string, npm: NpmRun): Promise<string> {
  const stdout = await runNpm(
    "pack",
    ["--pack-destination", destination, "--ignore-scripts", "--json", ...(await registryOnly(npm))],
    packageSpec,
    destination,
    npm,
  );
  const packed = (JSON.parse(stdout) as { filename?: unknown }[])[0]?.filename;
  if (typeof packed !== "string" || packed.includes("/") || packed.includes("\\")) {
    throw new Error("npm pack did not name the tarball it wrote");
  }
  return join(destination, packed);
}

/** Runs `npm <command> ...options [spec]` in `cwd`; resolves with its stdout, rejects with npm's reason. */
async function runNpm(
  command: string,
  options: readonly string[],
  spec: string | undefined,
  cwd: string,
  npm: NpmRun,
): Promise<string> {
  if (!existsSync(npm.cli)) throw new Error(`the npm CLI is missing (${npm.cli})`);
  if (npm.home !== undefined) await mkdir(npm.home, { recursive: true });
  const { registry, timeoutMs } = npm;
  const argv = [
    npm.cli,
    command,
    ...options,
    "--no-update-notifier",
    // No git dependency is ever fetched: npm's git is `false`, which fails (a package anyone can
    // publish may depend on `git+file:` repositories of the server, or `git+ssh:` with its keys).
    "--git=false",
    ...(registry ? ["--registry", registry] : []),
    ...(spec === undefined ? [] : [spec]),
  ];
  return new Promise<string>((resolve, reject) => {
    execFile(
      process.execPath,
      argv,
      {
        cwd,
        env: npmEnvironment(process.env, npm.home),
        timeout: timeoutMs,
        killSignal: "SIGKILL",
        maxBuffer: 4 * 1024 * 1024,
        windowsHide: true,
      },
      (error, stdout, stderr) => {
        if (!error) return resolve(String(stdout));
        if ((error as { killed?: boolean }).killed) {
          return reject(new Error(`npm ${command} did not finish within ${Math.round(timeoutMs / 1000)}s`));
        }
        const spawnCode = (error as { code?: unknown }).code;
        if (typeof spawnCode === "string") return reject(new Error(`npm could not be started (${spawnCode})`));
        reject(new Error(npmReason(String(stderr), command)));
      },
    );
  });
}

/**
 * Variables npm is not given: cloud credentials and Sluice's settings (its secrets key among them),
 * which npm never needs, and inherited `npm_*` variables. Those reach Sluice from an npm that
 * started it (`npm start`, `npx`) for its own scripts: its user agent and version, package fields,
 * lifecycle. npm reads `npm_config_*` in any case, hence the flag.
 */
const WITHHELD_FROM_NPM = /^(AWS_|SLUICE_|npm_)/i;

/**
 * The environment npm runs with: `base` (Sluice's own) without {@link WITHHELD_FROM_NPM}, and with
 * `home`, npm's home, cache and user config there.
 */
function npmEnvironment(base: NodeJS.ProcessEnv, home: string | undefined): NodeJS.ProcessEnv {
  const kept = Object.entries(base).filter(([key]) => !WITHHELD_FROM_NPM.test(key));
  return {
    ...Object.fromEntries(kept),
    ...(home === undefined
      ? {}
      : { HOME: home, npm_config_cache: join(home, "cache"), npm_config_userconfig: join(home, ".npmrc") }),
  };
}

/**
 * The useful part of npm's error output: `E404 404 Not Found - GET https://... - Not found`, or
 * `ECONNREFUSED FetchError: request to ... failed, reason: connect ECONNREFUSED ...`.
 */
export function npmReason(stderr: string, command = "install"): string {
  const lines = stderr
    .split("\n")
    .map((line) => /^npm (?:error|ERR!)\s?(.*)$/.exec(line.trimEnd())?.[1]?.trim())
    .filter((line): line is string => Boolean(line));
  const code = lines.find((line) => line.startsWith("code "))?.slice("code ".length);
  const message = lines.find(
    (line) => !/^(code|errno|syscall|path|dest|A complete log|Log files were not written)\b/.test(line),
  );
  const reason = [code, message].filter(Boolean).join(" ") || `npm ${command} failed`;
  return reason.length > REASON_LENGTH ? `${reason.slice(0, REASON_LENGTH - 1)}…` : reason;
}
