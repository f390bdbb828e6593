import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { bundleComponent, loadEsbuild } from "#adapters/aws/source-bundle";
import { resolveAmongFiles } from "#adapters/component-files-plugin";
import { npmPackagesPlugin } from "#adapters/npm/esbuild-plugin";
import {
  componentFilesOf,
  entryCode,
  MAX_COMPONENT_FILES,
  MAX_COMPONENT_FILES_BYTES,
  packComponentFiles,
  unpackComponentFiles,
} from "#core/component-files";
import { DomainError } from "#core/errors";
import { sha256Hex } from "#core/sha256";
import { appFiles } from "../../support/registry-tree.ts";

const esbuild = await loadEsbuild("native");
const outDir = mkdtempSync(join(tmpdir(), "sluice-files-"));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

const packed = (files: Record<string, string>, entry?: string) => packComponentFiles(componentFilesOf(files, entry));

/** Imports a bundle: the component's default export. (Its inline map names files that are not on disk: dropped.) */
async function importBundle(bundle: string): Promise<Record<string, any>> {
  const file = join(outDir, `${sha256Hex(bundle)}.mjs`);
  writeFileSync(file, bundle.replace(/^\/\/# sourceMappingURL=.*$/m, ""));
  return ((await import(pathToFileURL(file).href)) as { default: Record<string, any> }).default;
}

/** Bundles packed files and imports the bundle. */
const load = async (code: string) => importBundle(await bundleComponent(code, { esbuild, resolveDir: outDir }));

/** The message of the DomainError `promise` rejects with. */
async function refusal(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(DomainError);
  return (error as DomainError).message;
}

describe("componentFilesOf: the paths and bounds of component_files", () => {
  it("makes paths canonical and takes the only file as the entry", () => {
    expect(componentFilesOf({ "./a//b/c.mjs": "x" }, undefined)).toEqual({
      entry: "a/b/c.mjs",
      files: { "a/b/c.mjs": "x" },
    });
    expect(componentFilesOf({ "a\\b.mjs": "x", "c.mjs": "y" }, "./a/b.mjs").entry).toBe("a/b.mjs");
  });

  it.each([
    ["../../../../etc/passwd.mjs", 'must not contain ".."'],
    ["a/../../b.mjs", 'must not contain ".."'],
    ["/etc/passwd.mjs", "must be a relative path"],
    ["C:/x.mjs", "must be a relative path"],
    ["file:///etc/x.mjs", "must be a relative path"],
    ["a\u0000.mjs", "control character"],
    ["passwd", "must end in one of"],
    [`${"a/".repeat(20)}x.mjs`, "folders deep"],
    [`${"a".repeat(300)}.mjs`, "longer than"],
  ])("refuses the path %j", (path, why) => {
    expect(() => componentFilesOf({ [path]: "x", "b.mjs": "y" }, "b.mjs")).toThrow(why);
  });

  it("refuses too many files, too many bytes, a missing or absent entry, two names of one file", () => {
    const many = Object.fromEntries(Array.from({ length: MAX_COMPONENT_FILES + 1 }, (_, i) => [`f${i}.mjs`, ""]));
    expect(() => componentFilesOf(many, "f0.mjs")).toThrow(`at most ${MAX_COMPONENT_FILES} files`);
    const big = {
      "a.mjs": "x".repeat(MAX_COMPONENT_FILES_BYTES / 2),
      "b.mjs": "y".repeat(MAX_COMPONENT_FILES_BYTES / 2 + 1),
    };
    expect(() => componentFilesOf(big, "a.mjs")).toThrow("bytes in all");
    expect(() => componentFilesOf({ "a.mjs": "x", "b.mjs": "y" }, undefined)).toThrow("component_entry: is required");
    expect(() => componentFilesOf({ "a.mjs": "x" }, "b.mjs")).toThrow("not in component_files");
    expect(() => componentFilesOf({ "a.mjs": "x", "./a.mjs": "y" }, "a.mjs")).toThrow("name the same file");
    expect(() => componentFilesOf({}, undefined)).toThrow("at least one file");
  });

  it("packs canonically: the same files in any order give the same text, other contents another", () => {
    const one = packed({ "b.mjs": "2", "a.mjs": "1" }, "a.mjs");
    expect(packed({ "a.mjs": "1", "b.mjs": "2" }, "a.mjs")).toBe(one);
    expect(packed({ "a.mjs": "1", "b.mjs": "3" }, "a.mjs")).not.toBe(one);
    expect(unpackComponentFiles(one)).toEqual({ entry: "a.mjs", files: { "a.mjs": "1", "b.mjs": "2" } });
    expect(entryCode(one)).toBe("1");
    expect(entryCode("export default {}")).toBe("export default {}");
    expect(unpackComponentFiles("export default {}")).toBeUndefined();
  });

  it("holds packed text sent as component_code to the same rules", () => {
    const forged = `//sluice:component-files v1\n${JSON.stringify({ entry: "a.mjs", files: { "a.mjs": "x", "../b.mjs": "y" } })}`;
    expect(() => unpackComponentFiles(forged)).toThrow('must not contain ".."');
    expect(() => unpackComponentFiles("//sluice:component-files v1\n{not json")).toThrow("not their JSON");
  });
});

describe("resolveAmongFiles", () => {
  const paths = new Set(["app.app.mjs", "sources/a/a.mjs", "sources/common/base.mjs", "lib/index.ts", "app/x.app.ts"]);
  it.each([
    ["sources/a/a.mjs", "../../app.app.mjs", "app.app.mjs"],
    ["sources/a/a.mjs", "../common/base", "sources/common/base.mjs"],
    ["sources/a/a.mjs", "../../lib", "lib/index.ts"],
    ["sources/a/a.mjs", "../../app/x.app", "app/x.app.ts"],
    ["sources/a/a.mjs", "../../app/x.app.js", "app/x.app.ts"],
    ["sources/a/a.mjs", "./a.mjs", "sources/a/a.mjs"],
  ])("from %s, %s is %s", (importer, specifier, path) => {
    expect(resolveAmongFiles(paths, importer, specifier)).toEqual({ path });
  });

  it("refuses what leads out of the files, and finds nothing for a missing file", () => {
    expect(resolveAmongFiles(paths, "sources/a/a.mjs", "../../../../etc/passwd")).toHaveProperty("refused");
    expect(resolveAmongFiles(paths, "app.app.mjs", "../app.app.mjs")).toHaveProperty("refused");
    expect(resolveAmongFiles(paths, "app.app.mjs", "/etc/passwd")).toHaveProperty("refused");
    expect(resolveAmongFiles(paths, "sources/a/a.mjs", "./missing.mjs")).toBeUndefined();
  });
});

describe("bundling a multi-file component", () => {
  it("bundles an ESM registry-layout source with its app, the app's common file and a common base", async () => {
    const component = await load(packed(appFiles("webhooks"), "sources/new-request/new-request.mjs"));
    expect(component.key).toBe("webhooks-new-request");
    expect(Object.keys(component.props)).toEqual(["webhooks", "http", "db", "resStatusCode", "resContentType"]);
    expect(component.props.webhooks.methods.summarize({ method: "GET", path: "/x" })).toBe("Request GET /x");
    expect(component.props.resContentType.propDefinition[0]).toBe(component.props.webhooks);
  });

  it("bundles the same tree with esbuild-wasm, as the API functions on AWS do", async () => {
    const wasm = await loadEsbuild("wasm");
    try {
      const code = packed(appFiles("feeds"), "sources/new-item/new-item.ts");
      const component = await importBundle(await bundleComponent(code, { esbuild: wasm, resolveDir: outDir }));
      expect(component.key).toBe("feeds-new-item");
      expect(Object.keys(component.props)).toEqual(["feeds", "timer"]);
    } finally {
      await wasm.stop();
    }
  });

  it("bundles TypeScript with defineSource/defineApp from @pipedream/types, extensionless imports and JSON", async () => {
    const component = await load(packed(appFiles("feeds"), "sources/new-item/new-item.ts"));
    expect(component.key).toBe("feeds-new-item");
    expect(component.props.feeds.methods.itemKey({ link: "l", title: "t" })).toBe("l");
    const emitted: unknown[] = [];
    await component.run.call({
      ...component.methods,
      feeds: component.props.feeds.methods,
      $emit: (event: unknown, meta: unknown) => emitted.push([event, meta]),
    });
    expect(emitted).toEqual([
      [
        { guid: "item-1", title: "First item" },
        { id: "item-1", summary: "First item" },
      ],
      [
        { link: "https://example.com/2", title: "Second item" },
        { id: "https://example.com/2", summary: "Second item" },
      ],
    ]);
  });

  it("bundles CommonJS requiring CommonJS and ESM files", async () => {
    const component = await load(packed(appFiles("legacy_counter"), "sources/counter/counter.js"));
    expect(component.key).toBe("legacy_counter-counter");
    const emitted: unknown[] = [];
    const db = new Map<string, unknown>([["n", 4]]);
    await component.run.call({
      legacyCounter: component.props.legacyCounter.methods,
      db: { get: (k: string) => db.get(k), set: (k: string, v: unknown) => db.set(k, v) },
      $emit: (event: unknown) => emitted.push(event),
    });
    expect(emitted).toEqual([{ n: 5, label: "TICK 5" }]);
  });

  it("bundles import cycles and a deep chain of imports", async () => {
    const cycle = await load(
      packed(
        {
          "a.mjs":
            'import { b } from "./b.mjs"; export const a = () => "a"; export default { name: "cycle", run: () => b() };',
          "b.mjs": 'import { a } from "./a.mjs"; export const b = () => "b" + a();',
        },
        "a.mjs",
      ),
    );
    expect(cycle.run()).toBe("ba");
    const depth = 150;
    const chain: Record<string, string> = {};
    for (let i = 0; i < depth; i++) chain[`d/${i}.mjs`] = `import n from "./${i + 1}.mjs"; export default n + 1;`;
    chain[`d/${depth}.mjs`] = "export default 0;";
    chain["entry.mjs"] = 'import n from "./d/0.mjs"; export default { name: "deep", n };';
    expect((await load(packed(chain, "entry.mjs"))).n).toBe(depth);
  });

  it.each([
    ["../../../../etc/passwd", "../../../../etc/passwd", "it leads out of the component's files"],
    ["/etc/passwd", "/etc/passwd", "only relative imports"],
    // Server paths are never quoted back (redactPaths), not even the client's own.
    ["file:///etc/passwd", "passwd", "only relative imports"],
    ["./missing.mjs", "./missing.mjs", "no such file among the component's files"],
  ])("refuses an import of %j, naming the importing file and the import", async (specifier, shown, why) => {
    const code = packed(
      {
        "sources/s/s.mjs": 'import base from "../common/base.mjs"; export default { ...base, name: "s" };',
        "sources/common/base.mjs": `import x from ${JSON.stringify(specifier)}; export default { x };`,
      },
      "sources/s/s.mjs",
    );
    const message = await refusal(bundleComponent(code, { esbuild, resolveDir: outDir }));
    expect(message).toContain(`sources/common/base.mjs: cannot import ${JSON.stringify(shown)}: ${why}`);
  });

  it("reads no file of the server's disk, even one next to the bundle's folder", async () => {
    writeFileSync(join(outDir, "secret.mjs"), 'export default "server secret";');
    const message = await refusal(
      bundleComponent(packed({ "a.mjs": 'import s from "./secret.mjs"; export default { s };' }), {
        esbuild,
        resolveDir: outDir,
      }),
    );
    expect(message).toContain('a.mjs: cannot import "./secret.mjs": no such file');
  });

  it("reports a syntax error with the file, line and column", async () => {
    const code = packed(
      { "a.mjs": 'import b from "./b.ts"; export default b;', "b.ts": "const x = ;\nexport default {};" },
      "a.mjs",
    );
    expect(await refusal(bundleComponent(code, { esbuild, resolveDir: outDir }))).toMatch(
      /b\.ts: Unexpected ";" \(line 1, column 11\)/,
    );
  });

  it("bundles a single TypeScript module importing @pipedream/types offline, npm unreachable", async () => {
    const code = [
      'import { defineAction, defineSource, type SourceHttpRunOptions } from "@pipedream/types";',
      "const action = defineAction({ key: 'a', name: 'A', version: '0.0.1', type: 'action', async run() { return 1; } });",
      "export default defineSource({",
      "  key: 'ts-single', name: 'TS', version: '0.0.1', props: { http: '$.interface.http' },",
      "  methods: { action: () => action },",
      "  async run(event: SourceHttpRunOptions) { this.$emit(event); },",
      "});",
    ].join("\n");
    const offline = npmPackagesPlugin({ cacheDir: join(outDir, "npm-cache"), registry: "http://127.0.0.1:9/" });
    const component = await importBundle(
      await bundleComponent(code, { esbuild, resolveDir: outDir, plugins: [offline] }),
    );
    expect(component.key).toBe("ts-single");
    expect(component.methods.action().key).toBe("a");
    expect(existsSync(join(outDir, "npm-cache"))).toBe(false);
  });

  it("keeps the single-module rule for component_code", async () => {
    const message = await refusal(
      bundleComponent('import x from "./x.mjs"; export default { x };', { esbuild, resolveDir: outDir }),
    );
    expect(message).toContain("a component is a single module");
  });
});
