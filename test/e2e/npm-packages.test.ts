import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Plugin } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { npmCacheFolder, npmPackagesPlugin } from "#adapters/local/npm-packages";
import { bundleComponent } from "#adapters/local/sandbox-bundle";
import { isDomainError } from "#core/errors";

// Real esbuild, real `node` children and, for failures, a real `npm`, pointed at a closed port or
// at a local server that answers 404: nothing here needs the internet or the public registry.
const FIXTURE_PACKAGE = fileURLToPath(new URL("../fixtures/npm/tiny-fixture-pkg/", import.meta.url));

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
    const plugin = npmPackagesPlugin({ cacheDir, registry: closedRegistry, installTimeoutMs: 10_000 });
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
    const plugin = npmPackagesPlugin({ cacheDir, registry: closedRegistry });
    const path = await bundle(`import { axios } from "@pipedream/platform@^3"; export default axios;`, plugin);
    expect(await runInNode(path, "typeof m.default")).toBe('"function"');
  });

  it("bundles shipped dependencies imported directly, CommonJS require included", async () => {
    const plugin = npmPackagesPlugin({ cacheDir: freshCache(), registry: closedRegistry });
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
    const plugin = npmPackagesPlugin({ cacheDir, registry: closedRegistry });
    const path = await bundle(`import { axios } from "@pipedream/platform@^1"; export default axios;`, plugin);
    expect(await runInNode(path, "m.default")).toBe('"fake platform 1.6.8"');
  });

  it("bundles a package from a pre-populated cache folder, with no network", async () => {
    const cacheDir = freshCache();
    const target = join(npmCacheFolder(cacheDir, "sluice-tiny-fixture", "^1"), "node_modules", "sluice-tiny-fixture");
    cpSync(FIXTURE_PACKAGE, target, { recursive: true });
    const plugin = npmPackagesPlugin({ cacheDir, registry: closedRegistry, installTimeoutMs: 5_000 });
    const path = await bundle(
      `import x from "sluice-tiny-fixture@^1";
       export default { version: x.version, doubled: x.double(21) };`,
      plugin,
    );
    expect(JSON.parse(await runInNode(path, "m.default"))).toEqual({ version: "1.2.3", doubled: 42 });
  });

  it("leaves Node built-ins to Node", async () => {
    const plugin = npmPackagesPlugin({ cacheDir: freshCache(), registry: closedRegistry, installTimeoutMs: 5_000 });
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
    const plugin = npmPackagesPlugin({ cacheDir: freshCache(), registry: closedRegistry, installTimeoutMs: 4_000 });
    const text = await bundleError(`import { axios } from "@pipedream/platform@^99"; export default axios;`, plugin);
    expect(text).toMatch(/^cannot install npm package "@pipedream\/platform@\^99": /);
  });

  it("fails the build naming the package when the registry cannot be reached", async () => {
    const cacheDir = freshCache();
    const plugin = npmPackagesPlugin({ cacheDir, registry: closedRegistry, installTimeoutMs: 4_000 });
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
      const plugin = npmPackagesPlugin({ cacheDir: freshCache(), registry: `http://127.0.0.1:${port}/` });
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

  it("rejects an import whose version part is not a range", async () => {
    const plugin = npmPackagesPlugin({ cacheDir: freshCache(), registry: closedRegistry });
    const text = await bundleError(`import x from "left-pad@git+ssh:x"; export default x;`, plugin);
    expect(text).toBe('"left-pad@git+ssh:x" is not a valid npm package name (line 1, column 15)');
  });
});
