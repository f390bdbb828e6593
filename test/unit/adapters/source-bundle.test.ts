import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Plugin } from "esbuild";
import { unzipSync } from "fflate";
import { describe, expect, it } from "vitest";
import {
  bundleComponent,
  componentBundler,
  loadEsbuild,
  RUNTIME_LAYER_MODULE,
  sourceEntry,
  sourceZip,
  zipReproducibly,
} from "#adapters/aws/source-bundle";
import { npmPackagesPlugin } from "#adapters/npm/esbuild-plugin";
import { npmCacheFolder } from "#adapters/npm/package-cache";
import { DomainError } from "#core/errors";
import { eventually } from "../../support/eventually.ts";

const esbuild = await loadEsbuild("native");

const COMPONENT = `
export default {
  name: "Bundle test",
  version: "0.0.1",
  props: { greeting: { type: "string", default: "hi" } },
  async run() { this.$emit({ greeting: this.greeting }); },
};`;

/** Central-directory entries of a zip: name, DOS time/date, external attributes. */
function centralEntries(zip: Uint8Array) {
  const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  const entries: { name: string; time: number; date: number; attrs: number }[] = [];
  for (let at = 0; at + 46 <= zip.length; at++) {
    if (view.getUint32(at, true) !== 0x02014b50) continue;
    const nameLength = view.getUint16(at + 28, true);
    entries.push({
      name: new TextDecoder().decode(zip.subarray(at + 46, at + 46 + nameLength)),
      time: view.getUint16(at + 12, true),
      date: view.getUint16(at + 14, true),
      attrs: view.getUint32(at + 38, true),
    });
  }
  return entries;
}

describe("sourceZip of a bundled component", () => {
  it("gives byte-identical zips for the same code, and another zip for other code", async () => {
    const first = sourceZip(await bundleComponent(COMPONENT, { esbuild }));
    const second = sourceZip(await bundleComponent(COMPONENT, { esbuild }));
    expect(Buffer.from(second.zip).equals(Buffer.from(first.zip))).toBe(true);
    expect(first.sha256).toBe(createHash("sha256").update(first.zip).digest("hex"));
    const other = sourceZip(await bundleComponent(COMPONENT.replace("hi", "hello"), { esbuild }));
    expect(other.sha256).not.toBe(first.sha256);
  });

  it("holds the entry and the component bundle, sorted, with a fixed date and rw-r--r-- files", async () => {
    const { zip } = sourceZip(await bundleComponent(COMPONENT, { esbuild }));
    const files = unzipSync(zip);
    expect(Object.keys(files)).toEqual(["component.mjs", "index.mjs"]);
    const entry = new TextDecoder().decode(files["index.mjs"]);
    expect(entry).toBe(sourceEntry(RUNTIME_LAYER_MODULE));
    expect(entry).toContain('from "/opt/nodejs/sluice-runtime.mjs"');
    expect(entry).toContain('import("./component.mjs")');
    const bundle = new TextDecoder().decode(files["component.mjs"]);
    expect(bundle).toContain("Bundle test");
    expect(bundle).toContain("sourceMappingURL=data:application/json;base64,");
    expect(bundle.startsWith('import { createRequire as __sluiceCreateRequire } from "node:module";')).toBe(true);
    for (const item of centralEntries(zip)) {
      expect(item.attrs >>> 16, item.name).toBe(0o644);
      // 2000-01-01 00:00:00 as a DOS date: year 20 since 1980, January, day 1.
      expect([item.date, item.time], item.name).toEqual([(20 << 9) | (1 << 5) | 1, 0]);
    }
  });

  it("writes the runtime module the entry imports from as given", () => {
    expect(sourceEntry("file:///tmp/layer/nodejs/sluice-runtime.mjs")).toContain(
      'import { createSourceHandler } from "file:///tmp/layer/nodejs/sluice-runtime.mjs";',
    );
  });
});

describe("zipReproducibly", () => {
  it("does not depend on the order files are given in", () => {
    const a = zipReproducibly({ "b.txt": "b", "a.txt": "a" });
    const b = zipReproducibly({ "a.txt": "a", "b.txt": "b" });
    expect(a.sha256).toBe(b.sha256);
  });
});

describe("bundleComponent", () => {
  it("bundles CommonJS and TypeScript components", async () => {
    const cjs = await bundleComponent('module.exports = { name: "cjs", run() {} };', { esbuild });
    expect(cjs).toContain('name: "cjs"');
    const ts = await bundleComponent('const n: number = 1; export default { name: "ts", version: String(n) };', {
      esbuild,
    });
    expect(ts).not.toContain(": number");
  });

  it("answers a validation error on component_code naming the line of a syntax error", async () => {
    const error = await bundleComponent("export default {\n  name: 'x',\n  run() {\n}", { esbuild }).catch((e) => e);
    expect(error).toBeInstanceOf(DomainError);
    expect(error).toMatchObject({ code: "validation", issues: [{ field: "component_code" }] });
    expect(error.message).toMatch(/line 4/);
  });

  it("refuses imports of files by path", async () => {
    for (const path of ["/proc/self/environ", "./sibling.js", "file:///etc/passwd"]) {
      const error = await bundleComponent(`import x from ${JSON.stringify(path)}; export default { x };`, {
        esbuild,
      }).catch((e) => e);
      expect(error, path).toMatchObject({ code: "validation" });
      expect(error.message, path).toContain("a component is a single module");
    }
  });

  it("answers an unresolvable npm package as a validation error", async () => {
    const error = await bundleComponent('import x from "not-installed-anywhere"; export default { x };', {
      esbuild,
    }).catch((e) => e);
    expect(error).toMatchObject({ code: "validation" });
    expect(error.message).toContain("not-installed-anywhere");
  });

  it("inlines packages that plugins resolve, and passes a plugin's DomainError through", async () => {
    const virtualPackage: Plugin = {
      name: "virtual",
      setup(build) {
        build.onResolve({ filter: /^virtual-pkg$/ }, () => ({ path: "virtual-pkg", namespace: "virtual" }));
        build.onLoad({ filter: /.*/, namespace: "virtual" }, () => ({ contents: "export const answer = 42;" }));
        build.onResolve({ filter: /^broken-pkg$/ }, () => {
          throw new DomainError("validation", "component_code: cannot install broken-pkg", [
            { field: "component_code", message: "cannot install broken-pkg" },
          ]);
        });
      },
    };
    const bundle = await bundleComponent('import { answer } from "virtual-pkg"; export default { answer };', {
      esbuild,
      plugins: [virtualPackage],
    });
    expect(bundle).toContain("answer = 42");
    const error = await bundleComponent('import x from "broken-pkg"; export default { x };', {
      esbuild,
      plugins: [virtualPackage],
    }).catch((e) => e);
    expect(error).toMatchObject({ code: "validation", message: "component_code: cannot install broken-pkg" });
  });
});

describe("componentBundler", () => {
  it("loads esbuild once, on the first bundle, and bundles with it", async () => {
    let loads = 0;
    const bundle = componentBundler({
      esbuild: async () => {
        loads += 1;
        return esbuild;
      },
    });
    expect(loads).toBe(0);
    const [first, second] = await Promise.all([bundle(COMPONENT), bundle(COMPONENT)]);
    expect(first).toBe(second);
    expect(first).toContain("Bundle test");
    expect(loads).toBe(1);
  });

  it("bundles one code once (a deploy's describe and prepare), another code anew, and keeps the last 16", async () => {
    const built: string[] = [];
    const counting: typeof esbuild = {
      ...esbuild,
      build: ((options: Parameters<typeof esbuild.build>[0]) => {
        built.push(String(options.stdin?.contents ?? options.entryPoints));
        return esbuild.build(options);
      }) as typeof esbuild.build,
    };
    const bundle = componentBundler({ esbuild: async () => counting });
    const first = await bundle(COMPONENT);
    expect(await bundle(COMPONENT)).toBe(first);
    expect(built).toHaveLength(1);
    const other = COMPONENT.replace("Bundle test", "Another bundle");
    expect(await bundle(other)).toContain("Another bundle");
    expect(built).toHaveLength(2);
    for (let n = 0; n < 16; n++) await bundle(`${COMPONENT}\n// ${n}`);
    const before = built.length;
    await bundle(COMPONENT);
    expect(built).toHaveLength(before + 1);
  });

  it("does not keep a failed load: the next bundle loads esbuild again", async () => {
    const failure = new Error("no esbuild here");
    let loads = 0;
    const bundle = componentBundler({
      esbuild: async () => {
        loads += 1;
        if (loads === 1) throw failure;
        return esbuild;
      },
    });
    await expect(bundle(COMPONENT)).rejects.toBe(failure);
    await expect(bundle(COMPONENT)).resolves.toContain("Bundle test");
    await bundle(COMPONENT);
    expect(loads).toBe(2);
  });
});

describe("bundleComponent and the files of the server (issue 12, item 1)", () => {
  const root = mkdtempSync(join(tmpdir(), "sluice-bundle-reads-"));
  const secret = "zq7SecretTokenOfTheServer";
  writeFileSync(join(root, "secret-key"), `${secret} and more`);
  writeFileSync(join(root, "credentials.json"), JSON.stringify({ token: secret }));
  const resolveDir = join(root, "bundles", "one");
  mkdirSync(resolveDir, { recursive: true });
  const cacheDir = join(root, "packages");

  /** Puts a package into the npm plugin's cache, as an install would (`latest` of `name`). */
  function cachedPackage(name: string, index: string) {
    const folder = join(npmCacheFolder(cacheDir, name, undefined), "node_modules", name);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, "package.json"), JSON.stringify({ name, version: "1.0.0", main: "index.js" }));
    writeFileSync(join(folder, "index.js"), index);
  }
  cachedPackage("maps-to-secret", "module.exports = { answer: 42 };\n//# sourceMappingURL=../../../../secret-key\n");
  cachedPackage(
    "requires-a-server-file",
    `module.exports = require(${JSON.stringify(join(root, "credentials.json"))});\n`,
  );
  // pg-format's idiom: a file beside it, required by a path computed from __dirname.
  cachedPackage(
    "reads-beside-it",
    'const path = require("path");\nmodule.exports = { words: require(__dirname + "/words.js"), n: require(path.join(__dirname, "n.json")) };\n',
  );
  writeFileSync(
    join(npmCacheFolder(cacheDir, "reads-beside-it", undefined), "node_modules", "reads-beside-it", "words.js"),
    'module.exports = ["select", "from"];\n',
  );
  writeFileSync(
    join(npmCacheFolder(cacheDir, "reads-beside-it", undefined), "node_modules", "reads-beside-it", "n.json"),
    "7\n",
  );
  cachedPackage("reads-above-it", 'module.exports = require(__dirname + "/../../../../secret-key");\n');
  const plugins = [npmPackagesPlugin({ cacheDir, registry: "http://127.0.0.1:9/", installTimeoutMs: 2000 })];

  it("reads no file that a source-map comment of the code names, in any of its forms", async () => {
    const comments = [
      "//# sourceMappingURL=../../secret-key",
      `//# sourceMappingURL=${join(root, "secret-key")}`,
      `//@ sourceMappingURL=${pathToFileURL(join(root, "secret-key")).href}`,
      `/*# sourceMappingURL=${join(root, "secret-key")} */`,
      "//# sourceMappingURL=/proc/self/environ",
      "//# sourceMappingURL=/dev/zero",
    ];
    for (const comment of comments) {
      const bundle = await bundleComponent(`${COMPONENT}\n${comment}\n`, { esbuild, resolveDir });
      expect(bundle, comment).toContain("Bundle test");
      expect(bundle, comment).not.toContain(secret);
      expect(bundle, comment).not.toContain("sourceMappingURL=/");
    }
  });

  it("ignores the source-map comment of a file of an npm package", async () => {
    const bundle = await bundleComponent(
      'import pkg from "maps-to-secret";\nexport default { answer: pkg.answer };\n',
      {
        esbuild,
        resolveDir,
        plugins,
      },
    );
    expect(bundle).toContain("answer: 42");
    expect(bundle).not.toContain(secret);
  });

  it("refuses a package that imports a file outside the package cache, naming the package only", async () => {
    const error = await bundleComponent('import creds from "requires-a-server-file";\nexport default { creds };\n', {
      esbuild,
      resolveDir,
      plugins,
    }).catch((e) => e);
    expect(error).toMatchObject({ code: "validation", issues: [{ field: "component_code" }] });
    expect(error.message).toBe(
      'component_code: npm package "requires-a-server-file" could not be bundled: the error is in node_modules/requires-a-server-file/index.js, line 1',
    );
  });

  it('bundles a package\'s require(__dirname + "/file") of a file beside it, which then runs', async () => {
    const bundle = await bundleComponent('import pkg from "reads-beside-it";\nexport default { pkg };\n', {
      esbuild,
      resolveDir,
      plugins,
    });
    expect(bundle).not.toContain("__dirname");
    const file = join(resolveDir, "reads-beside-it.mjs");
    writeFileSync(file, bundle);
    const loaded = await import(pathToFileURL(file).href);
    expect(loaded.default.pkg).toEqual({ words: ["select", "from"], n: 7 });
  });

  it("still refuses a package whose __dirname require leaves the package cache", async () => {
    const error = await bundleComponent('import creds from "reads-above-it";\nexport default { creds };\n', {
      esbuild,
      resolveDir,
      plugins,
    }).catch((e) => e);
    expect(error.message).toBe(
      'component_code: npm package "reads-above-it" could not be bundled: the error is in node_modules/reads-above-it/index.js, line 1',
    );
  });

  it("names the user's own line in a bundling error, after TypeScript esbuild dropped", async () => {
    const code = '// one\ninterface A { a: number }\ntype B = A;\n\nimport x from "./x.js";\nexport default { x };\n';
    const error = await bundleComponent(code, { esbuild, resolveDir }).catch((e) => e);
    expect(error.message).toBe(
      'component_code: cannot import "./x.js": a component is a single module; import npm packages only (line 5, column 15)',
    );
  });

  it.skipIf(process.platform !== "linux")("bundles again after esbuild's service process died", async () => {
    await bundleComponent(COMPONENT, { esbuild, resolveDir });
    const service = childProcesses().find((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("--service="));
    expect(service).toBeDefined();
    process.kill(service as number, "SIGKILL");
    await eventually(() => (existsSync(`/proc/${service}`) ? undefined : true), "the service to be gone");
    // esbuild's own API answers every later call with "The service is no longer running".
    const bundle = await eventually(
      () => bundleComponent(COMPONENT, { esbuild, resolveDir }).catch(() => undefined),
      "a bundle from a new service",
      { timeoutMs: 10_000 },
    );
    expect(bundle).toContain("Bundle test");
  });
});

/** Ids of this process's children, from /proc. */
function childProcesses(): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        // `pid (name) state ppid ...`; the name may hold spaces, so split after its closing parenthesis.
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === process.pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}
