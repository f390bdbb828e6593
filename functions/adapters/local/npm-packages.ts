/**
 * npm packages for components (component-model.md: "use npm packages without an install step";
 * "a source may pin a version or a version range inside the require string"). An esbuild plugin
 * that resolves the bare imports of a component's own code, so the bundle carries its packages:
 *
 *   import { axios } from "@pipedream/platform";      // shipped with Sluice
 *   import get from "lodash@~4.17/get";                // pinned range, installed on first use
 *   const dayjs = require("dayjs");                    // no range: latest, installed on first use
 *
 * Resolution order for `name[@range][/subpath]`:
 * 1. Packages Sluice ships ({@link SHIPPED_NPM_PACKAGES}, read from Sluice's own `node_modules`),
 *    when the import gives no range or the shipped version satisfies it. Offline, and the same
 *    code as Sluice's own tests run.
 * 2. The content-addressed cache: `<cacheDir>/<sha256 of "name@range">/node_modules/<name>`, where
 *    a missing range is written `latest` (so `lodash` hashes `lodash@latest`).
 * 3. `npm install` of `name@range` into a temporary folder under `<cacheDir>`, renamed into place
 *    once complete, so a crash or a concurrent install never leaves a half-filled cache entry.
 *    Installs skip lifecycle scripts (`--ignore-scripts`) and dev dependencies.
 *
 * npm is the one Sluice depends on ({@link bundledNpmCli}: `node_modules/npm`, pinned in
 * package.json), run as `node <npm-cli.js>` with Sluice's own Node, never an `npm` from PATH: the
 * Lambda Node.js runtime has none, and a pinned CLI installs the same way on every machine. On
 * Lambda only /tmp is writable, so npm is given a home of its own there ({@link NpmPackagesOptions.npmHome}).
 * npm gets Sluice's environment without `AWS_*`, `SLUICE_*` and inherited `npm_*` variables
 * ({@link npmEnvironment}): credentials and the secrets key are none of its business, even though
 * it runs no package code (`--ignore-scripts`).
 *
 * Imports made by packages themselves are left to esbuild's own resolution inside the package's
 * tree. Node built-ins stay external.
 *
 * Cache layout and cleanup:
 *
 *   <cacheDir>/
 *     <sha256("name@range")>/node_modules/<name>/...   one finished install per spec, never changed
 *     .install-<sha256>-<pid>-<random>/                 an install in progress (or left by a crash)
 *     .npm-home/                                        npm's own home and cache, when put here (AWS)
 *
 * Entries are never refreshed or evicted: `lodash` stays at the version that was latest on first
 * use. To take newer versions or reclaim space, stop Sluice and delete the folder (or one entry);
 * the next bundle that needs a package installs it again. Leftover `.install-*` folders and
 * `.npm-home` are safe to delete at any time Sluice is stopped.
 */

import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { isBuiltin } from "node:module";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { OnResolveArgs, OnResolveResult, Plugin, PluginBuild } from "esbuild";
import { NPM_CLI_PACKAGE, SHIPPED_NPM_PACKAGES } from "#config/shared-names";
import { redactPaths } from "#core/redact-paths";
import { sha256Hex } from "#core/sha256";

/** Options of {@link npmPackagesPlugin}. */
export interface NpmPackagesOptions {
  /** Root of the content-addressed package cache (created on first install). */
  readonly cacheDir: string;
  /**
   * npm registry URL passed to `npm install --registry`.
   * @default npm's own configuration (usually https://registry.npmjs.org/)
   */
  readonly registry?: string;
  /**
   * Time limit of one `npm install`; the process is killed when it is reached.
   * @default 120000
   */
  readonly installTimeoutMs?: number;
  /**
   * The `node_modules` folder that holds the packages Sluice ships (it must be named
   * `node_modules`: packages are resolved from its parent, as Node does).
   * @default the `node_modules` of the Sluice checkout
   */
  readonly shippedPackagesDir?: string;
  /**
   * The npm CLI's JavaScript entry (`bin/npm-cli.js` of an npm package), run with Sluice's own
   * Node (`process.execPath`). On AWS, `bundledNpmCli(<task root>/node_modules)`.
   * @default {@link bundledNpmCli}(): the npm of the Sluice checkout
   */
  readonly npmCli?: string;
  /**
   * A writable folder of npm's own, created on first install: npm runs with `HOME` set to it, its
   * cache (`npm_config_cache`) in `<npmHome>/cache` and its user configuration
   * (`npm_config_userconfig`) at `<npmHome>/.npmrc`, so it writes nothing elsewhere and no user's
   * `~/.npmrc` applies. Required on Lambda, where only /tmp is writable: `<cacheDir>/.npm-home`.
   * @default unset: the user's home, npm cache and `~/.npmrc`, as the user's own npm uses them
   */
  readonly npmHome?: string;
}

/** The CLI's entry inside {@link NPM_CLI_PACKAGE} (the package's `exports` hide it from `require.resolve`). */
const NPM_CLI_ENTRY = join("bin", "npm-cli.js");
/** The name of npm's own home inside a cache folder, when it is put there (dot-prefixed, as `.install-*`). */
export const NPM_HOME_FOLDER = ".npm-home";

/** A bare import split into its parts: `@scope/name@^1/sub` → `{name: "@scope/name", range: "^1", subpath: "sub"}`. */
export interface NpmSpecifier {
  readonly name: string;
  readonly range: string | undefined;
  readonly subpath: string | undefined;
}

const DEFAULT_SHIPPED_DIR = fileURLToPath(new URL("../../../node_modules/", import.meta.url));

/**
 * The npm CLI Sluice depends on, `<nodeModulesDir>/npm/bin/npm-cli.js`: by default the Sluice
 * checkout's; a Lambda function passes its own (`/var/task/node_modules`), which carries npm.
 */
export function bundledNpmCli(nodeModulesDir: string = DEFAULT_SHIPPED_DIR): string {
  return join(nodeModulesDir, NPM_CLI_PACKAGE, NPM_CLI_ENTRY);
}

const DEFAULT_INSTALL_TIMEOUT_MS = 120_000;
/** Set on our own `build.resolve` calls so the plugin does not resolve its own lookups again. */
const OWN_LOOKUP = "sluice-npm-packages";
const NAME_PART = /^[a-zA-Z0-9~-][a-zA-Z0-9._~-]*$/;
/**
 * Versions, ranges and dist-tags only. No `:` or `/`, so an import can never make npm install
 * from a URL, a git repository or a local path.
 */
const RANGE = /^[a-zA-Z0-9.^~*<>=|+ -]+$/;
/** `node:`, `data:`, `https:`... (a `:` after an `@` is a range, and rejected by {@link RANGE}). */
const URL_SCHEME = /^[a-zA-Z][a-zA-Z0-9+.-]*:/;
/** Longest npm reason kept in an error message. */
const REASON_LENGTH = 300;

/**
 * Splits a bare import specifier into package name, optional version range and optional subpath.
 * Returns undefined when it is not a valid npm package reference.
 */
export function parseNpmSpecifier(specifier: string): NpmSpecifier | undefined {
  const parts = specifier.split("/");
  const scoped = specifier.startsWith("@");
  const scope = scoped ? parts.shift() : undefined;
  const head = parts.shift();
  if (head === undefined || (scoped && (scope === "@" || scope === undefined))) return undefined;
  const at = head.indexOf("@");
  const bareName = at === -1 ? head : head.slice(0, at);
  const range = at === -1 ? undefined : head.slice(at + 1);
  if (!NAME_PART.test(bareName) || (scope !== undefined && !NAME_PART.test(scope.slice(1)))) return undefined;
  if (range !== undefined && (range.trim() === "" || !RANGE.test(range))) return undefined;
  const name = scope === undefined ? bareName : `${scope}/${bareName}`;
  if (name.length > 214) return undefined;
  const subpath = parts.length > 0 ? parts.join("/") : undefined;
  if (subpath !== undefined && (subpath === "" || parts.some((part) => part === ".." || part === ""))) return undefined;
  return { name, range: range?.trim(), subpath };
}

/** The argument given to `npm install`, also the text hashed into the cache folder name. */
export const npmInstallSpec = (name: string, range: string | undefined) => `${name}@${range ?? "latest"}`;

/** The cache folder of one spec: `<cacheDir>/<sha256 of "name@range">`. */
export function npmCacheFolder(cacheDir: string, name: string, range: string | undefined): string {
  return join(cacheDir, sha256Hex(npmInstallSpec(name, range)));
}

/**
 * An esbuild plugin that bundles the npm packages a component imports (see the file header).
 * Pass it in `plugins` instead of `packages: "external"`.
 */
export function npmPackagesPlugin(options: NpmPackagesOptions): Plugin {
  const shippedDir = options.shippedPackagesDir ?? DEFAULT_SHIPPED_DIR;
  const npm: NpmRun = {
    cli: options.npmCli ?? bundledNpmCli(),
    home: options.npmHome,
    registry: options.registry,
    timeoutMs: options.installTimeoutMs ?? DEFAULT_INSTALL_TIMEOUT_MS,
  };
  return {
    name: "sluice-npm-packages",
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, async (args): Promise<OnResolveResult | undefined> => {
        if ((args.pluginData as Record<string, unknown> | undefined)?.[OWN_LOOKUP]) return undefined;
        if (!isComponentImport(args)) return undefined;
        const spec = parseNpmSpecifier(args.path);
        if (!spec) return { errors: [{ text: `"${args.path}" is not a valid npm package name` }] };
        // `crypto/x`: a built-in's name with a subpath but no range stays Node's (and fails there).
        if (spec.range === undefined && isBuiltin(spec.name)) return { path: args.path, external: true };

        let folder = shippedFolder(shippedDir, spec);
        if (folder === undefined) {
          try {
            folder = await cachedOrInstalled(options.cacheDir, spec, npm);
          } catch (error) {
            // npm names its cache and home folders in its errors: none of the client's business.
            const reason = redactPaths(error instanceof Error ? error.message : String(error), [
              resolve(options.cacheDir),
              npm.home ?? homedir(),
            ]);
            return {
              errors: [{ text: `cannot install npm package "${npmInstallSpec(spec.name, spec.range)}": ${reason}` }],
            };
          }
        }
        return resolveInside(build, args, folder, spec);
      });
      // A package's own imports are esbuild's to resolve, and a package (anyone can publish one)
      // may name any path: `require("/home/me/.docker/config.json")` would put that file into
      // the bundle, for the component to read at run time. Every file loaded from disk must be
      // a file of an installed package.
      const isPackageFile = packageFiles(options.cacheDir, shippedDir);
      build.onLoad({ filter: /.*/, namespace: "file" }, (args) =>
        isPackageFile(args.path)
          ? undefined
          : { errors: [{ text: "an npm package may import only files of npm packages" }] },
      );
    },
  };
}

/**
 * Whether a path (as esbuild loads it: symlinks resolved) is a file of an installed package:
 * inside `<cacheDir>/<hash>/node_modules/` or the shipped `node_modules`.
 */
function packageFiles(cacheDir: string, shippedDir: string): (path: string) => boolean {
  const real = (path: string) => {
    try {
      return realpathSync.native(path);
    } catch {
      return resolve(path);
    }
  };
  const inside = (folder: string, path: string) => {
    const rest = relative(folder, path);
    return rest !== "" && !rest.startsWith("..") && !isAbsolute(rest) ? rest : undefined;
  };
  return (path) => {
    if (inside(real(shippedDir), path) !== undefined) return true;
    const inCache = inside(real(cacheDir), path);
    return inCache !== undefined && /^[0-9a-f]{64}[\\/]node_modules[\\/]./.test(inCache);
  };
}

/**
 * True for an import written in the component's own code. Imports made by a package (a file under
 * some `node_modules`) resolve inside that package's tree; `#imports`, URLs and `data:` imports,
 * and Node built-ins are esbuild's to handle.
 */
function isComponentImport(args: OnResolveArgs): boolean {
  if (args.path.startsWith("#") || URL_SCHEME.test(args.path) || isBuiltin(args.path)) return false;
  return !args.importer.split(/[\\/]/).includes("node_modules");
}

/** The folder whose `node_modules` holds the shipped package, when it may serve this import. */
function shippedFolder(shippedDir: string, spec: NpmSpecifier): string | undefined {
  if (!SHIPPED_NPM_PACKAGES.includes(spec.name)) return undefined;
  const version = packageVersion(join(shippedDir, spec.name));
  if (version === undefined) return undefined;
  if (spec.range !== undefined && !satisfiesRange(version, spec.range)) return undefined;
  return dirname(shippedDir.replace(/[\\/]+$/, ""));
}

function packageVersion(packageDir: string): string | undefined {
  try {
    const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as { version?: unknown };
    return typeof manifest.version === "string" ? manifest.version : undefined;
  } catch {
    return undefined;
  }
}

async function resolveInside(
  build: PluginBuild,
  args: OnResolveArgs,
  folder: string,
  spec: NpmSpecifier,
): Promise<OnResolveResult> {
  const result = await build.resolve(spec.subpath === undefined ? spec.name : `${spec.name}/${spec.subpath}`, {
    resolveDir: folder,
    kind: args.kind,
    importer: args.importer,
    pluginData: { [OWN_LOOKUP]: true },
  });
  if (result.errors.length > 0) return { errors: result.errors };
  return {
    path: result.path,
    namespace: result.namespace,
    external: result.external,
    sideEffects: result.sideEffects,
    suffix: result.suffix,
    warnings: result.warnings,
  };
}

/** How npm is run: the plugin's options, resolved. */
interface NpmRun {
  readonly cli: string;
  readonly home: string | undefined;
  readonly registry: string | undefined;
  readonly timeoutMs: number;
}

/** Installs in progress in this process, by cache folder: one `npm install` per spec at a time. */
const installs = new Map<string, Promise<string>>();

async function cachedOrInstalled(cacheDir: string, spec: NpmSpecifier, npm: NpmRun): Promise<string> {
  const folder = npmCacheFolder(cacheDir, spec.name, spec.range);
  if (isInstalled(folder, spec.name)) return folder;
  let install = installs.get(folder);
  if (!install) {
    install = installInto(cacheDir, folder, spec, npm).finally(() => installs.delete(folder));
    installs.set(folder, install);
  }
  return install;
}

const isInstalled = (folder: string, name: string) => existsSync(join(folder, "node_modules", name, "package.json"));

async function installInto(cacheDir: string, folder: string, spec: NpmSpecifier, npm: NpmRun): Promise<string> {
  const hash = folder.slice(folder.lastIndexOf(sep) + 1);
  const temporary = join(cacheDir, `.install-${hash}-${process.pid}-${randomBytes(4).toString("hex")}`);
  await mkdir(temporary, { recursive: true });
  try {
    await runNpmInstall(temporary, npmInstallSpec(spec.name, spec.range), npm);
    if (!isInstalled(temporary, spec.name)) throw new Error(`npm finished without installing ${spec.name}`);
    try {
      await rename(temporary, folder);
    } catch (error) {
      // Another Sluice process finished the same install first: its copy is as good as ours.
      if (!isInstalled(folder, spec.name)) throw error;
    }
    return folder;
  } finally {
    await rm(temporary, { recursive: true, force: true });
  }
}

async function runNpmInstall(prefix: string, installSpec: string, npm: NpmRun): Promise<void> {
  if (!existsSync(npm.cli)) throw new Error(`the npm CLI is missing (${npm.cli})`);
  if (npm.home !== undefined) await mkdir(npm.home, { recursive: true });
  const { registry, timeoutMs } = npm;
  const args = [
    npm.cli,
    "install",
    "--prefix",
    prefix,
    "--no-audit",
    "--no-fund",
    "--ignore-scripts",
    "--no-save",
    "--omit=dev",
    "--no-update-notifier",
    ...(registry ? ["--registry", registry] : []),
    installSpec,
  ];
  return new Promise<void>((resolve, reject) => {
    execFile(
      process.execPath,
      args,
      {
        cwd: prefix,
        env: npmEnvironment(process.env, npm.home),
        timeout: timeoutMs,
        killSignal: "SIGKILL",
        maxBuffer: 4 * 1024 * 1024,
        windowsHide: true,
      },
      (error, _stdout, stderr) => {
        if (!error) return resolve();
        if ((error as { killed?: boolean }).killed) {
          return reject(new Error(`npm install did not finish within ${Math.round(timeoutMs / 1000)}s`));
        }
        const spawnCode = (error as { code?: unknown }).code;
        if (typeof spawnCode === "string") return reject(new Error(`npm could not be started (${spawnCode})`));
        reject(new Error(npmReason(String(stderr))));
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
export function npmReason(stderr: string): string {
  const lines = stderr
    .split("\n")
    .map((line) => /^npm (?:error|ERR!)\s?(.*)$/.exec(line.trimEnd())?.[1]?.trim())
    .filter((line): line is string => Boolean(line));
  const code = lines.find((line) => line.startsWith("code "))?.slice("code ".length);
  const message = lines.find(
    (line) => !/^(code|errno|syscall|path|dest|A complete log|Log files were not written)\b/.test(line),
  );
  const reason = [code, message].filter(Boolean).join(" ") || "npm install failed";
  return reason.length > REASON_LENGTH ? `${reason.slice(0, REASON_LENGTH - 1)}…` : reason;
}

// ---------------------------------------------------------------------------------------------
// A small semver range check: enough for the ranges people pin in import strings (`^1`, `~4.17`,
// `1.2.3`, `1.x`, `*`, `>=1.2 <2`, `1 - 2`, `^1 || ^2`). No loose mode. A prerelease version
// satisfies a range only when one of its comparators names a prerelease of the same x.y.z, as in
// node-semver. Unparseable ranges (dist-tags such as `next`) satisfy nothing.
// ---------------------------------------------------------------------------------------------

interface Version {
  readonly major: number;
  readonly minor: number;
  readonly patch: number;
  readonly prerelease: readonly (string | number)[];
}

type Operator = ">=" | ">" | "<" | "<=" | "=";
interface Comparator {
  readonly operator: Operator;
  readonly version: Version;
}

const VERSION =
  /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?$/;
const PARTIAL =
  /^v?(0|[1-9]\d*|[xX*])(?:\.(0|[1-9]\d*|[xX*])(?:\.(0|[1-9]\d*|[xX*])(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?)?)?$/;

/** Parses an exact version (`1.2.3`, `1.2.3-beta.1`); undefined otherwise. */
export function parseVersion(text: string): Version | undefined {
  const match = VERSION.exec(text.trim());
  if (!match) return undefined;
  return {
    major: Number(match[1]),
    minor: Number(match[2]),
    patch: Number(match[3]),
    prerelease: prereleaseIds(match[4]),
  };
}

const prereleaseIds = (text: string | undefined) =>
  text === undefined ? [] : text.split(".").map((id) => (/^\d+$/.test(id) ? Number(id) : id));

/** Negative, zero or positive as `a` sorts before, with or after `b` (semver precedence). */
export function compareVersions(a: Version, b: Version): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch || comparePrerelease(a.prerelease, b.prerelease);
}

function comparePrerelease(a: readonly (string | number)[], b: readonly (string | number)[]): number {
  if (a.length === 0 || b.length === 0) return b.length - a.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (x === y) continue;
    if (typeof x === "number" && typeof y === "number") return x - y;
    if (typeof x === "number") return -1;
    if (typeof y === "number") return 1;
    return x < y ? -1 : 1;
  }
  return 0;
}

/** True when `version` (exact, e.g. `1.2.3`) satisfies the npm `range`. */
export function satisfiesRange(version: string, range: string): boolean {
  const parsed = parseVersion(version);
  if (!parsed) return false;
  const sets = parseRange(range);
  if (!sets) return false;
  return sets.some((set) => satisfiesSet(parsed, set));
}

function satisfiesSet(version: Version, set: readonly Comparator[]): boolean {
  for (const { operator, version: bound } of set) {
    const order = compareVersions(version, bound);
    const ok =
      operator === "="
        ? order === 0
        : operator === ">="
          ? order >= 0
          : operator === ">"
            ? order > 0
            : operator === "<"
              ? order < 0
              : order <= 0;
    if (!ok) return false;
  }
  if (version.prerelease.length === 0) return true;
  return set.some(
    ({ version: bound }) =>
      bound.prerelease.length > 0 &&
      bound.major === version.major &&
      bound.minor === version.minor &&
      bound.patch === version.patch,
  );
}

/** A range as a list of comparator sets (`||` alternatives); undefined when it does not parse. */
function parseRange(range: string): Comparator[][] | undefined {
  const sets: Comparator[][] = [];
  for (const alternative of range.split("||")) {
    const text = alternative.trim().replace(/(>=|<=|>|<|=|~>?|\^)\s+/g, "$1");
    const hyphen = /^(\S+)\s+-\s+(\S+)$/.exec(text);
    const set = hyphen ? hyphenRange(hyphen[1]!, hyphen[2]!) : simpleRange(text);
    if (!set) return undefined;
    sets.push(set);
  }
  return sets;
}

interface PartialVersion {
  readonly major: number | undefined;
  readonly minor: number | undefined;
  readonly patch: number | undefined;
  readonly prerelease: readonly (string | number)[];
}

function parsePartial(text: string): PartialVersion | undefined {
  const match = PARTIAL.exec(text);
  if (!match) return undefined;
  const number = (part: string | undefined) => (part === undefined || /^[xX*]$/.test(part) ? undefined : Number(part));
  const major = number(match[1]);
  const minor = major === undefined ? undefined : number(match[2]);
  const patch = minor === undefined ? undefined : number(match[3]);
  return { major, minor, patch, prerelease: patch === undefined ? [] : prereleaseIds(match[4]) };
}

const makeVersion = (major: number, minor: number, patch: number, prerelease: readonly (string | number)[] = []) => ({
  major,
  minor,
  patch,
  prerelease,
});
/** The lowest version above every release of a line: `<2.0.0-0` excludes 2.0.0's prereleases. */
const floor = (major: number, minor: number, patch: number) => makeVersion(major, minor, patch, [0]);
const lowerBound = (p: PartialVersion) => makeVersion(p.major ?? 0, p.minor ?? 0, p.patch ?? 0, p.prerelease);
/** The first version past a partial: `1` → `2.0.0-0`, `1.2` → `1.3.0-0`. */
const pastPartial = (p: PartialVersion & { major: number }) =>
  p.minor === undefined ? floor(p.major + 1, 0, 0) : floor(p.major, p.minor + 1, 0);

function simpleRange(text: string): Comparator[] | undefined {
  if (text === "") return [];
  const set: Comparator[] = [];
  for (const token of text.split(/\s+/)) {
    const comparators = comparatorsOf(token);
    if (!comparators) return undefined;
    set.push(...comparators);
  }
  return set;
}

function comparatorsOf(token: string): Comparator[] | undefined {
  const match = /^(>=|<=|>|<|=|~>?|\^)?(.*)$/.exec(token);
  const operator = match?.[1] ?? "";
  const p = parsePartial(match?.[2] ?? "");
  if (!p) return undefined;
  if (p.major === undefined)
    return operator === "<" || operator === ">" ? [{ operator: "<", version: floor(0, 0, 0) }] : [];
  const major = p.major;
  const from: Comparator = { operator: ">=", version: lowerBound(p) };
  switch (operator) {
    case "":
    case "=":
      if (p.patch !== undefined) return [{ operator: "=", version: lowerBound(p) }];
      return [from, { operator: "<", version: pastPartial({ ...p, major }) }];
    case "^": {
      const upper =
        major > 0 || p.minor === undefined
          ? floor(major + 1, 0, 0)
          : p.minor > 0 || p.patch === undefined
            ? floor(0, p.minor + 1, 0)
            : floor(0, 0, p.patch + 1);
      return [from, { operator: "<", version: upper }];
    }
    case "~":
    case "~>":
      return [from, { operator: "<", version: pastPartial({ ...p, major }) }];
    case ">=":
      return [from];
    case "<":
      return [{ operator: "<", version: lowerBound(p) }];
    case ">":
      if (p.patch !== undefined) return [{ operator: ">", version: lowerBound(p) }];
      return [{ operator: ">=", version: pastPartial({ ...p, major }) }];
    case "<=":
      if (p.patch !== undefined) return [{ operator: "<=", version: lowerBound(p) }];
      return [{ operator: "<", version: pastPartial({ ...p, major }) }];
    default:
      return undefined;
  }
}

function hyphenRange(low: string, high: string): Comparator[] | undefined {
  const from = parsePartial(low);
  const to = parsePartial(high);
  if (!from || !to) return undefined;
  const set: Comparator[] = [{ operator: ">=", version: lowerBound(from) }];
  if (to.major === undefined) return set;
  if (to.patch !== undefined) set.push({ operator: "<=", version: lowerBound(to) });
  else set.push({ operator: "<", version: pastPartial({ ...to, major: to.major }) });
  return set;
}
