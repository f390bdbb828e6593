import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Plugin } from "esbuild";
import { zipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleComponent } from "#adapters/local/sandbox-bundle";
import { type NpmPackagesOptions, npmPackagesPlugin } from "#adapters/npm/esbuild-plugin";
import type { InstalledTreeStore } from "#adapters/npm/installed-trees";
import { bundledNpmCli } from "#adapters/npm/npm-cli";
import { npmCacheFolder } from "#adapters/npm/package-cache";
import { isDomainError } from "#core/errors";
import { type FixturePackage, type NpmRegistryFixture, startNpmRegistry } from "../support/npm-registry-fixture.ts";

// Real esbuild, real `node` children and the real npm CLI Sluice depends on, pointed at a tiny
// registry on 127.0.0.1, a closed port or a server that answers 404: nothing here needs the
// internet or the public registry. npm gets a home of its own per test (`npmHome`), so no test
// reads the machine's ~/.npmrc or npm cache, or writes there.
const FIXTURE_PACKAGE = fileURLToPath(new URL("../fixtures/npm/tiny-fixture-pkg/", import.meta.url));
const NPM_VERSION = (
  JSON.parse(readFileSync(join(bundledNpmCli(), "..", "..", "package.json"), "utf8")) as { version: string }
).version;
/** Real installs start a Node process running npm: generous on a loaded 2-core machine, still bounded. */
const INSTALL_TIMEOUT_MS = 45_000;
const INSTALL_TEST_TIMEOUT_MS = 90_000;

let workDir: string;
let closedRegistry: string;

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), "sluice-npm-"));
  const server = createServer();
  const port = await listen(server);
  await new Promise((resolve) => server.close(resolve));
  closedRegistry = `http://127.0.0.1:${port}/`;
});

afterAll(() => {
  rmSync(workDir, { recursive: true, force: true });
});

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)));
}

/** A fresh cache folder per test, so no test sees another's installs. */
function freshCache(): string {
  return mkdtempSync(join(workDir, "cache-"));
}

/** The plugin over a fresh cache, with npm's home in this test's own folder. */
function pluginWith(options: Partial<NpmPackagesOptions> = {}): Plugin {
  return npmPackagesPlugin({ cacheDir: freshCache(), npmHome: mkdtempSync(join(workDir, "home-")), ...options });
}

/** Bundles `code` as the sandbox host does and returns the bundle's path. */
function bundle(code: string, plugin: Plugin): Promise<string> {
  return bundleComponent(code, join(mkdtempSync(join(workDir, "bundle-")), "component.mjs"), [plugin]);
}

/** The message of the first error of a failed bundle, with its position in the code. */
async function bundleError(code: string, plugin: Plugin): Promise<string> {
  const error = await bundle(code, plugin).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  const text = isDomainError(error) ? error.issues?.[0]?.message : undefined;
  if (text === undefined) throw new Error(`expected the bundle to fail with a validation error, got ${String(error)}`);
  return text;
}

/** Imports the bundle in a plain `node` child and returns what `expression` (over `m`, the module) prints. */
function runInNode(bundlePath: string, expression: string): Promise<string> {
  const script = `const m = await import(${JSON.stringify(bundlePath)}); console.log(JSON.stringify(${expression}));`;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ["--input-type=module", "-e", script],
      { timeout: 15_000, cwd: workDir },
      (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout.trim())),
    );
  });
}

/** Writes a package into the cache folder of `name@range`, as a finished install would leave it. */
function prepopulate(cacheDir: string, name: string, range: string, files: Record<string, string>): void {
  const packageDir = join(npmCacheFolder(cacheDir, name, range), "node_modules", name);
  mkdirSync(packageDir, { recursive: true });
  for (const [file, text] of Object.entries(files)) writeFileSync(join(packageDir, file), text);
}

const FAKE_PLATFORM = {
  "package.json": JSON.stringify({ name: "@pipedream/platform", version: "1.6.8", main: "index.js" }),
  "index.js": 'exports.axios = "fake platform 1.6.8";',
};

describe("npmPackagesPlugin", () => {
  it("bundles @pipedream/platform from the packages Sluice ships, and the bundle runs in plain node", async () => {
    const cacheDir = freshCache();
    const plugin = pluginWith({ cacheDir, registry: closedRegistry, installTimeoutMs: 10_000 });
    const path = await bundle(
      `import { axios, ConfigurationError } from "@pipedream/platform";
       export default { axios, ConfigurationError };`,
      plugin,
    );
    const types = await runInNode(path, "[typeof m.default.axios, typeof m.default.ConfigurationError]");
    expect(JSON.parse(types)).toEqual(["function", "function"]);
    // Served without an install: nothing was written to the cache.
    expect(readdirSync(cacheDir)).toEqual([]);
  });

  it("uses the shipped package when its version satisfies the pinned range", async () => {
    const cacheDir = freshCache();
    // A decoy in the cache for the same spec: the shipped copy must win.
    prepopulate(cacheDir, "@pipedream/platform", "^3", FAKE_PLATFORM);
    const plugin = pluginWith({ cacheDir, registry: closedRegistry });
    const path = await bundle(`import { axios } from "@pipedream/platform@^3"; export default axios;`, plugin);
    expect(await runInNode(path, "typeof m.default")).toBe('"function"');
  });

  it("bundles shipped dependencies imported directly, CommonJS require included", async () => {
    const plugin = pluginWith({ registry: closedRegistry });
    const path = await bundle(
      `const { v4 } = require("uuid");
       const mime = require("mime-types@^3");
       module.exports = { id: v4(), type: mime.lookup("a.json") };`,
      plugin,
    );
    const result = JSON.parse(await runInNode(path, "m.default")) as { id: string; type: string };
    expect(result.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.type).toBe("application/json");
  });

  it("falls through to the cache when the shipped version does not satisfy the range", async () => {
    const cacheDir = freshCache();
    prepopulate(cacheDir, "@pipedream/platform", "^1", FAKE_PLATFORM);
    const plugin = pluginWith({ cacheDir, registry: closedRegistry });
    const path = await bundle(`import { axios } from "@pipedream/platform@^1"; export default axios;`, plugin);
    expect(await runInNode(path, "m.default")).toBe('"fake platform 1.6.8"');
  });

  it("bundles a package from a pre-populated cache folder, with no network", async () => {
    const cacheDir = freshCache();
    const target = join(npmCacheFolder(cacheDir, "sluice-tiny-fixture", "^1"), "node_modules", "sluice-tiny-fixture");
    cpSync(FIXTURE_PACKAGE, target, { recursive: true });
    const plugin = pluginWith({ cacheDir, registry: closedRegistry, installTimeoutMs: 5_000 });
    const path = await bundle(
      `import x from "sluice-tiny-fixture@^1";
       export default { version: x.version, doubled: x.double(21) };`,
      plugin,
    );
    expect(JSON.parse(await runInNode(path, "m.default"))).toEqual({ version: "1.2.3", doubled: 42 });
  });

  it("leaves Node built-ins to Node", async () => {
    const plugin = pluginWith({ registry: closedRegistry, installTimeoutMs: 5_000 });
    const path = await bundle(
      `import { createHash } from "crypto";
       import { join } from "node:path";
       import { readFile } from "fs/promises";
       export default [createHash("sha256").update("x").digest("hex").length, join("a", "b"), typeof readFile];`,
      plugin,
    );
    expect(JSON.parse(await runInNode(path, "m.default"))).toEqual([64, "a/b", "function"]);
  });

  it("fails the build naming the package when the range cannot be installed", async () => {
    const plugin = pluginWith({ registry: closedRegistry, installTimeoutMs: 4_000 });
    const text = await bundleError(`import { axios } from "@pipedream/platform@^99"; export default axios;`, plugin);
    expect(text).toMatch(/^cannot install npm package "@pipedream\/platform@\^99": /);
  });

  it("fails the build naming the package when the registry cannot be reached", async () => {
    const cacheDir = freshCache();
    const plugin = pluginWith({ cacheDir, registry: closedRegistry, installTimeoutMs: 4_000 });
    const text = await bundleError(`import x from "sluice-made-up-package-7f3a"; export default x;`, plugin);
    expect(text).toMatch(/^cannot install npm package "sluice-made-up-package-7f3a@latest": ./);
    // The failed install left nothing behind, so a later bundle tries again.
    expect(readdirSync(cacheDir)).toEqual([]);
  });

  it("reports npm's reason, and concurrent bundles of the same package share one install", async () => {
    const requests: string[] = [];
    const registry = createServer((request, response) => {
      requests.push(request.url ?? "");
      response.writeHead(404, { "content-type": "application/json" });
      response.end('{"error":"Not found"}');
    });
    const port = await listen(registry);
    try {
      const plugin = pluginWith({ registry: `http://127.0.0.1:${port}/` });
      const code = `import x from "sluice-made-up-package-9c1e@~2.1"; export default x;`;
      const text = await bundleError(code, plugin);
      expect(text).toMatch(/^cannot install npm package "sluice-made-up-package-9c1e@~2\.1": E404 /);
      const onInstall = requests.length;
      expect(onInstall).toBeGreaterThan(0);

      requests.length = 0;
      const texts = await Promise.all([bundleError(code, plugin), bundleError(code, plugin)]);
      expect(texts).toEqual([text, text]);
      expect(requests.length).toBe(onInstall);
    } finally {
      await new Promise((resolve) => registry.close(resolve));
    }
  });

  it("reports why an install failed without the server's folders", async () => {
    // A cache folder that is a file: the install fails in mkdir, whose error names the path.
    const cacheDir = join(workDir, "cache-is-a-file");
    writeFileSync(cacheDir, "");
    const plugin = pluginWith({ cacheDir, registry: closedRegistry });
    const text = await bundleError(`import x from "sluice-fixture-pkg"; export default x;`, plugin);
    expect(text).toMatch(/^cannot install npm package "sluice-fixture-pkg@latest": E\w+/);
    expect(text).not.toContain(workDir);
  });

  it("rejects an import whose version part is not a range", async () => {
    const plugin = pluginWith({ registry: closedRegistry });
    const text = await bundleError(`import x from "left-pad@git+ssh:x"; export default x;`, plugin);
    expect(text).toBe('"left-pad@git+ssh:x" is not a valid npm package name (line 1, column 15)');
  });
});

/** Fixture packages of the local registry: `^1` must pick 1.4.2 over 1.0.0 and 2.0.0. */
const REGISTRY_PACKAGES: readonly FixturePackage[] = [
  ...["1.0.0", "1.4.2", "2.0.0"].map((version) => ({
    name: "sluice-fixture-pkg",
    version,
    files: {
      "index.js": `exports.version = ${JSON.stringify(version)}; exports.greet = (who) => "hello " + who;`,
    },
  })),
  ...["1.0.0", "1.1.0"].map((version) => ({
    name: "@sluice-fixture/util",
    version,
    files: {
      "index.js": `exports.version = ${JSON.stringify(version)}; exports.shout = (t) => t.toUpperCase() + "!";`,
    },
  })),
  {
    name: "sluice-fixture-app",
    version: "2.1.0",
    dependencies: { "@sluice-fixture/util": "^1.0.0" },
    files: {
      "index.js": `const util = require("@sluice-fixture/util");
        exports.welcome = (who) => util.shout("welcome " + who);
        exports.utilVersion = util.version;`,
    },
  },
];

/** Runs `test` against a fresh local registry, closed afterwards. */
async function withRegistry(test: (registry: NpmRegistryFixture) => Promise<void>): Promise<void> {
  const registry = await startNpmRegistry(REGISTRY_PACKAGES);
  try {
    await test(registry);
  } finally {
    await registry.close();
  }
}

describe("npmPackagesPlugin installing from a registry with the npm CLI Sluice depends on", () => {
  it(
    "installs a pinned range, the bundle runs in plain node, and a second bundle reuses the cache entry",
    () =>
      withRegistry(async (registry) => {
        const cacheDir = freshCache();
        const npmHome = mkdtempSync(join(workDir, "home-"));
        const options = { cacheDir, npmHome, registry: registry.url, installTimeoutMs: INSTALL_TIMEOUT_MS };
        const path = await bundle(
          `import pkg from "sluice-fixture-pkg@^1";
           export default { version: pkg.version, text: pkg.greet("sluice") };`,
          npmPackagesPlugin(options),
        );
        expect(JSON.parse(await runInNode(path, "m.default"))).toEqual({ version: "1.4.2", text: "hello sluice" });
        expect(registry.tarballRequests("sluice-fixture-pkg")).toBe(1);
        // The npm that installed is Sluice's own (the machine's may be another version, or none).
        expect(registry.requests.map((request) => request.userAgent.split(" ")[0])).toContain(`npm/${NPM_VERSION}`);
        // One finished cache entry, nothing left of the install, npm's own files in its home.
        const entry = npmCacheFolder(cacheDir, "sluice-fixture-pkg", "^1");
        expect(readdirSync(cacheDir)).toEqual([entry.slice(cacheDir.length + 1)]);
        expect(existsSync(join(npmHome, "cache", "_cacache"))).toBe(true);

        // A new plugin (a restarted Sluice) over the same cache: no request reaches the registry.
        const seen = registry.requests.length;
        const again = await bundle(
          `import { greet } from "sluice-fixture-pkg@^1"; export default greet("again");`,
          npmPackagesPlugin(options),
        );
        expect(await runInNode(again, "m.default")).toBe('"hello again"');
        expect(registry.requests.length).toBe(seen);
        expect(registry.tarballRequests()).toBe(1);
      }),
    INSTALL_TEST_TIMEOUT_MS,
  );

  it(
    "installs a package's dependencies from the registry too",
    () =>
      withRegistry(async (registry) => {
        const cacheDir = freshCache();
        const plugin = pluginWith({ cacheDir, registry: registry.url, installTimeoutMs: INSTALL_TIMEOUT_MS });
        const path = await bundle(
          `const app = require("sluice-fixture-app@^2");
           module.exports = { text: app.welcome("ada"), util: app.utilVersion };`,
          plugin,
        );
        expect(JSON.parse(await runInNode(path, "m.default"))).toEqual({ text: "WELCOME ADA!", util: "1.1.0" });
        expect(registry.tarballRequests("sluice-fixture-app")).toBe(1);
        expect(registry.tarballRequests("@sluice-fixture/util")).toBe(1);
        const installed = join(npmCacheFolder(cacheDir, "sluice-fixture-app", "^2"), "node_modules");
        expect(
          JSON.parse(readFileSync(join(installed, "@sluice-fixture", "util", "package.json"), "utf8")),
        ).toMatchObject({ version: "1.1.0" });
      }),
    INSTALL_TEST_TIMEOUT_MS,
  );

  it(
    "shares an installed tree by its resolved set: another environment fetches it instead of installing",
    () =>
      withRegistry(async (registry) => {
        // The shared store (S3 on AWS), in memory.
        const stored = new Map<string, Uint8Array>();
        const installedTrees: InstalledTreeStore = {
          get: async (key) => stored.get(key),
          put: async (key, zip) => void stored.set(key, zip),
        };
        const environment = () =>
          pluginWith({ registry: registry.url, installTimeoutMs: INSTALL_TIMEOUT_MS, installedTrees });
        const code = `const app = require("sluice-fixture-app@^2");
           module.exports = { text: app.welcome("ada"), util: app.utilVersion };`;
        expect(JSON.parse(await runInNode(await bundle(code, environment()), "m.default"))).toEqual({
          text: "WELCOME ADA!",
          util: "1.1.0",
        });
        expect(registry.tarballRequests()).toBe(2);
        expect([...stored.keys()]).toHaveLength(1);

        // A fresh environment (empty /tmp, its own npm cache): the set resolves to the same key,
        // and the tree comes from the store; no tarball is downloaded.
        expect(JSON.parse(await runInNode(await bundle(code, environment()), "m.default"))).toEqual({
          text: "WELCOME ADA!",
          util: "1.1.0",
        });
        expect(registry.tarballRequests()).toBe(2);
        // Another range that resolves to the same set shares the tree.
        await bundle(`module.exports = require("sluice-fixture-app@2.1.0").utilVersion;`, environment());
        expect(registry.tarballRequests()).toBe(2);
        expect([...stored.keys()]).toHaveLength(1);

        // A stored tree that names a file outside node_modules is not written; the install goes on.
        const [key] = [...stored.keys()];
        stored.set(key!, zipSync({ "node_modules/../../escaped.js": new TextEncoder().encode("x") }));
        const cacheDir = freshCache();
        await bundle(
          code,
          pluginWith({ cacheDir, registry: registry.url, installTimeoutMs: INSTALL_TIMEOUT_MS, installedTrees }),
        );
        expect(registry.tarballRequests()).toBe(4);
        expect(existsSync(join(cacheDir, "..", "escaped.js"))).toBe(false);
      }),
    INSTALL_TEST_TIMEOUT_MS,
  );

  it(
    "fails the build naming the package when the registry has no version in the range",
    () =>
      withRegistry(async (registry) => {
        const cacheDir = freshCache();
        const plugin = pluginWith({ cacheDir, registry: registry.url, installTimeoutMs: INSTALL_TIMEOUT_MS });
        const text = await bundleError(`import x from "sluice-fixture-pkg@^9"; export default x;`, plugin);
        expect(text).toMatch(/^cannot install npm package "sluice-fixture-pkg@\^9": ETARGET .*sluice-fixture-pkg@\^9/);
        expect(registry.tarballRequests()).toBe(0);
        expect(readdirSync(cacheDir)).toEqual([]);
      }),
    INSTALL_TEST_TIMEOUT_MS,
  );

  it(
    "installs no dependency from outside the registry: a folder, another server, a git repository of the server",
    async () => {
      // What a package anyone can publish may depend on, all on this machine.
      const folder = mkdtempSync(join(workDir, "local-dep-"));
      writeFileSync(join(folder, "package.json"), JSON.stringify({ name: "leak", version: "1.0.0" }));
      writeFileSync(join(folder, "index.js"), 'module.exports = "LOCAL-SECRET";');
      const repo = mkdtempSync(join(workDir, "repo-"));
      cpSync(folder, repo, { recursive: true });
      const git = (...args: string[]) =>
        new Promise<void>((resolve, reject) =>
          execFile("git", ["-C", repo, "-c", "user.email=a@b.c", "-c", "user.name=a", ...args], (error) =>
            error ? reject(error) : resolve(),
          ),
        );
      await git("init", "-q");
      await git("add", ".");
      await git("commit", "-qm", "leak");
      // Another server: the registry's own tarball, relayed from elsewhere.
      const base = await startNpmRegistry(REGISTRY_PACKAGES);
      let relayed = 0;
      const relay = createServer(async (request, response) => {
        relayed++;
        const answer = await fetch(new URL(request.url ?? "/", base.url));
        response.writeHead(answer.status, { "content-type": "application/octet-stream" });
        response.end(Buffer.from(await answer.arrayBuffer()));
      });
      // Named `localhost` (127.0.0.1 here): another host than the registry's, as an outside server is.
      const relayUrl = `http://localhost:${await listen(relay)}/sluice-fixture-pkg/-/sluice-fixture-pkg-1.4.2.tgz`;
      const evil = (name: string, dependency: string): FixturePackage => ({
        name,
        version: "1.0.0",
        dependencies: { leak: dependency },
        files: { "index.js": 'module.exports = require("leak");' },
      });
      const registry = await startNpmRegistry([
        ...REGISTRY_PACKAGES,
        evil("sluice-evil-folder", `file:${folder}`),
        evil("sluice-evil-relay", relayUrl),
        evil("sluice-evil-git", `git+file://${repo}`),
      ]);
      try {
        for (const [name, reason] of [
          ["sluice-evil-folder", /is a folder on disk, not a package of the registry/],
          [
            "sluice-evil-relay",
            /a dependency is a tarball outside the registry \(http:\/\/localhost:\d+\/sluice-fixture-pkg/,
          ],
          ["sluice-evil-git", /cannot install/],
        ] as const) {
          const cacheDir = freshCache();
          const plugin = pluginWith({ cacheDir, registry: registry.url, installTimeoutMs: INSTALL_TIMEOUT_MS });
          const text = await bundleError(`import x from "${name}@1.0.0"; export default x;`, plugin);
          expect(text, name).toMatch(new RegExp(`^cannot install npm package "${name}@1\\.0\\.0"`));
          expect(text, name).toMatch(reason);
          expect(text, name).not.toContain("LOCAL-SECRET");
          expect(text, name).not.toContain(workDir.split("/").pop());
          // Nothing was installed into the cache.
          expect(
            readdirSync(cacheDir).filter((entry) => !entry.startsWith(".")),
            name,
          ).toEqual([]);
        }
        // Not even fetched: npm reaches no host but the registry's (decision 542).
        expect(relayed).toBe(0);
      } finally {
        await Promise.all([registry.close(), base.close(), new Promise((resolve) => relay.close(resolve))]);
      }
    },
    INSTALL_TEST_TIMEOUT_MS,
  );

  it("runs npm for at most 50 packages of one bundle, and refuses the others naming them", async () => {
    // An npm that fails at once, and counts its runs.
    const cliDir = mkdtempSync(join(workDir, "counting-npm-"));
    const npmCli = join(cliDir, "npm-cli.cjs");
    writeFileSync(
      npmCli,
      `require("node:fs").appendFileSync(require("node:path").join(__dirname, "runs.txt"), process.argv.at(-1) + "\\n");
       process.stderr.write("npm error code E404\\nnpm error not found\\n");
       process.exit(1);`,
    );
    const plugin = pluginWith({ npmCli, registry: closedRegistry, installTimeoutMs: 10_000 });
    const names = Array.from({ length: 60 }, (_, n) => `sluice-many-${n}`);
    const code = `${names.map((name, n) => `import p${n} from "${name}";`).join("\n")}
export default [${names.map((_, n) => `p${n}`)}];`;
    const error = await bundle(code, plugin).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    // The bundle fails naming the first package that failed (the ones past 50 fail with the cap's words).
    expect(isDomainError(error) ? error.issues?.[0]?.message : String(error)).toMatch(/^cannot install npm package/);
    // Installs only: npm's configuration is asked once besides (`config get ...`).
    const runs = readFileSync(join(cliDir, "runs.txt"), "utf8")
      .trim()
      .split("\n")
      .filter((line) => line.startsWith("sluice-many-"));
    expect(runs.length).toBeGreaterThan(0);
    expect(runs.length).toBeLessThanOrEqual(50);
  });

  it("runs the given npm CLI with node, npm's home and settings, and without Sluice's secrets", async () => {
    const cliDir = mkdtempSync(join(workDir, "fake-npm-"));
    const npmCli = join(cliDir, "npm-cli.cjs");
    writeFileSync(
      npmCli,
      `const { writeFileSync } = require("node:fs");
       const seen = { argv: process.argv.slice(2), env: process.env, cwd: process.cwd() };
       writeFileSync(require("node:path").join(__dirname, "seen.json"), JSON.stringify(seen));
       process.stderr.write("npm error code EFAKE\\nnpm error the fake npm says no\\n");
       process.exit(1);`,
    );
    const npmHome = join(mkdtempSync(join(workDir, "home-")), "npm");
    // Credentials, Sluice's secrets key, and what an outer `npm start` or `npx` leaves in the environment.
    const planted = {
      AWS_SECRET_ACCESS_KEY: "not-for-npm",
      SLUICE_SECRET_KEY: "not-for-npm",
      NPM_CONFIG_CACHE: "/not-for-npm",
      npm_config_user_agent: "npm/0.0.0",
    };
    const saved = Object.fromEntries(Object.keys(planted).map((name) => [name, process.env[name]]));
    Object.assign(process.env, planted);
    try {
      const plugin = pluginWith({ npmCli, npmHome, registry: closedRegistry, installTimeoutMs: 10_000 });
      const text = await bundleError(`import x from "sluice-fixture-pkg@~1.4"; export default x;`, plugin);
      expect(text).toMatch(/^cannot install npm package "sluice-fixture-pkg@~1\.4": EFAKE the fake npm says no/);
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    const seen = JSON.parse(readFileSync(join(cliDir, "seen.json"), "utf8")) as {
      argv: string[];
      env: Record<string, string>;
    };
    // The lockfile first: what it names is checked before anything is installed.
    expect(seen.argv[0]).toBe("install");
    expect(seen.argv).toEqual(
      expect.arrayContaining([
        "--package-lock-only",
        "--omit-lockfile-registry-resolved=false",
        "--ignore-scripts",
        "--omit=dev",
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        "--git=false",
        closedRegistry,
      ]),
    );
    expect(seen.argv.at(-1)).toBe("sluice-fixture-pkg@~1.4");
    // Every host but the registry's through the refusing proxy (this machine's npm names none of its own).
    const proxy = seen.argv.find((arg) => arg.startsWith("--proxy="))?.slice("--proxy=".length);
    expect(proxy).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(seen.argv).toEqual(
      expect.arrayContaining([`--https-proxy=${proxy}`, `--noproxy=${new URL(closedRegistry).hostname}`]),
    );
    expect(seen.env).toMatchObject({
      HOME: npmHome,
      npm_config_cache: join(npmHome, "cache"),
      npm_config_userconfig: join(npmHome, ".npmrc"),
    });
    for (const name of Object.keys(planted)) expect(seen.env[name]).toBeUndefined();
    expect(existsSync(npmHome)).toBe(true);
  });

  it("fails the build saying so when the npm CLI is missing", async () => {
    const npmCli = join(workDir, "no-such-npm", "bin", "npm-cli.js");
    const plugin = pluginWith({ npmCli, registry: closedRegistry });
    const text = await bundleError(`import x from "sluice-fixture-pkg"; export default x;`, plugin);
    // Named by its file only: the server's folders are no client's business.
    expect(text).toContain(
      'cannot install npm package "sluice-fixture-pkg@latest": the npm CLI is missing (npm-cli.js)',
    );
    expect(text).not.toContain(workDir);
  });
});

describe("bundledNpmCli", () => {
  it("finds Sluice's own npm in the checkout, or in the node_modules it is given", () => {
    const cli = bundledNpmCli();
    expect(cli).toBe(fileURLToPath(new URL("../../node_modules/npm/bin/npm-cli.js", import.meta.url)));
    expect(existsSync(cli)).toBe(true);
    expect(bundledNpmCli("/var/task/node_modules")).toBe("/var/task/node_modules/npm/bin/npm-cli.js");
  });
});
