import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UrlCodeFetcher } from "#adapters/url-code-fetcher";
import { rawFileUrl, treeRoot } from "#adapters/url-component-tree";
import { unpackComponentFiles } from "#core/component-files";
import { DomainError } from "#core/errors";
import { importSpecifiers, MAX_TEMPLATE_NESTING } from "#core/import-specifiers";
import { appFiles, startTreeServer, type TreeServer } from "../../support/registry-tree.ts";

describe("importSpecifiers", () => {
  it("finds import, export-from, side-effect, dynamic and require specifiers, once each", () => {
    const code = [
      'import a from "./a.mjs";',
      "import { b } from '../b';",
      'import "./side.mjs";',
      'export * from "./re.mjs";',
      'export { c } from "./c.mjs";',
      'const d = require("./d.cjs");',
      'const e = await import("./e.mjs");',
      'import type { T } from "./types";',
      'import again from "./a.mjs";',
      'import axios from "@pipedream/platform";',
    ].join("\n");
    expect(importSpecifiers(code)).toEqual([
      "./a.mjs",
      "../b",
      "./side.mjs",
      "./re.mjs",
      "./c.mjs",
      "./d.cjs",
      "./e.mjs",
      "./types",
      "@pipedream/platform",
    ]);
  });

  it("skips comments, strings, template literals and regular expressions that only look like imports", () => {
    const code = [
      '// import x from "./commented.mjs";',
      '/* require("./block.cjs") */',
      "const text = \"import y from './in-string.mjs'\";",
      // A template's ${...} part is code: a require() in it counts.
      'const template = `import z from "./in-template.mjs" $' + "{require('./in-substitution.mjs')}`;",
      'const pattern = /from "\\.\\/regex.mjs"/;',
      'const ratio = 4 / 2; import real from "./real.mjs";',
      'obj.from "./not-a-keyword.mjs";',
    ].join("\n");
    expect(importSpecifiers(code)).toEqual(["./in-substitution.mjs", "./real.mjs"]);
  });

  it("scans a user's hostile file: many imports, and templates nested to a bounded depth", () => {
    // 60,000 distinct imports: the found list was searched for each (quadratic, 15 s).
    const many = Array.from({ length: 60_000 }, (_, n) => `import "./${n}";`).join("");
    expect(importSpecifiers(many)).toHaveLength(60_000);
    // 6,000 templates nested in each other's substitutions overflowed the stack (a 500).
    const deep = `${"`${".repeat(6_000)}require("./deep.mjs")${"}`".repeat(6_000)}`;
    expect(importSpecifiers(deep)).toEqual([]);
    const shallow = `${"`${".repeat(MAX_TEMPLATE_NESTING)}require("./found.mjs")${"}`".repeat(MAX_TEMPLATE_NESTING)}`;
    expect(importSpecifiers(shallow)).toEqual(["./found.mjs"]);
  });
});

describe("rawFileUrl and treeRoot", () => {
  it("reads a GitHub blob page as its raw file, and leaves other URLs alone", () => {
    expect(rawFileUrl(new URL("https://github.com/acme/comps/blob/main/components/http/sources/a/a.mjs")).href).toBe(
      "https://raw.githubusercontent.com/acme/comps/main/components/http/sources/a/a.mjs",
    );
    expect(rawFileUrl(new URL("https://github.com/acme/comps/tree/main/x.mjs")).href).toBe(
      "https://github.com/acme/comps/tree/main/x.mjs",
    );
  });

  it("roots a tree at the first path component, or at the repository on raw.githubusercontent.com", () => {
    expect(treeRoot(new URL("http://h/components/http/sources/a/a.mjs"))).toBe("/components/");
    expect(treeRoot(new URL("http://h/a.mjs"))).toBe("/");
    expect(treeRoot(new URL("https://raw.githubusercontent.com/o/r/main/components/x/x.mjs"))).toBe("/o/r/main/");
  });
});

describe("UrlCodeFetcher following a component's relative imports", () => {
  let tree: TreeServer;
  let elsewhere: TreeServer;
  const fetcher = new UrlCodeFetcher({ allowPrivateAddresses: true, timeoutMs: 2000 });

  /** A generated tree: `count` files under /gen/, each importing the next. */
  const chain = (count: number, prefix: string) =>
    Object.fromEntries(
      Array.from({ length: count }, (_, i) => [
        `/${prefix}/f${i}.mjs`,
        i === count - 1 ? "export default 0;" : `import n from "./f${i + 1}.mjs"; export default n + 1;`,
      ]),
    );

  beforeAll(async () => {
    elsewhere = await startTreeServer({ "/components/x.mjs": "export default 1;" });
    tree = await startTreeServer({
      ...chain(20, "deep"),
      ...chain(5, "short"),
      "/hostile/passwd.mjs": 'import p from "../../../../etc/passwd"; export default { p };',
      "/hostile/away.mjs": 'import x from "./away-target.mjs"; export default { x };',
      "/hostile/away-target.mjs": (response) => {
        response.writeHead(302, { location: `${elsewhere.origin}/components/x.mjs` });
        response.end();
      },
      "/hostile/big.mjs": 'import a from "./a.mjs"; import b from "./b.mjs"; export default { a, b };',
      "/hostile/a.mjs": `export default "${"a".repeat(600)}";`,
      "/hostile/b.mjs": `export default "${"b".repeat(600)}";`,
      "/hostile/missing.mjs": 'import m from "./nowhere"; export default { m };',
      "/cycle/a.mjs": 'import b from "./b.mjs"; export default { b };',
      "/cycle/b.mjs": 'import a from "./a.mjs"; export default { a };',
    });
  });
  afterAll(async () => {
    await tree?.close();
    await elsewhere?.close();
  });

  const refusal = async (url: string, options = fetcher) => {
    const error = await options.fetchCode(url).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(DomainError);
    expect(error).toMatchObject({ code: "validation", issues: [{ field: "component_url" }] });
    return (error as Error).message;
  };

  it("fetches a registry-layout source with its app and common files, each once, named below the tree's root", async () => {
    tree.requested.length = 0;
    const code = await fetcher.fetchCode(`${tree.origin}/components/webhooks/sources/new-request/new-request.mjs`);
    const component = unpackComponentFiles(code);
    const expected = Object.fromEntries(
      Object.entries(appFiles("webhooks"))
        // The app's action is no import of the source.
        .filter(([path]) => !path.startsWith("actions/"))
        .map(([path, text]) => [`webhooks/${path}`, text]),
    );
    expect(component).toEqual({ entry: "webhooks/sources/new-request/new-request.mjs", files: expected });
    expect(tree.requested.length).toBe(new Set(tree.requested).size);
  });

  it("finds extensionless TypeScript imports and JSON the way the bundler resolves them", async () => {
    const component = unpackComponentFiles(
      await fetcher.fetchCode(`${tree.origin}/components/feeds/sources/new-item/new-item.ts`),
    );
    expect(Object.keys(component?.files ?? {}).sort()).toEqual([
      "feeds/app/feeds.app.ts",
      "feeds/sources/common/common.ts",
      "feeds/sources/common/sample-items.json",
      "feeds/sources/new-item/new-item.ts",
    ]);
  });

  it("keeps a file that imports no sibling as its plain text", async () => {
    const code = await fetcher.fetchCode(`${tree.origin}/components/legacy_counter/sources/counter/labels.cjs`);
    expect(code).toBe(appFiles("legacy_counter")["sources/counter/labels.cjs"]);
  });

  it("follows an import cycle once", async () => {
    tree.requested.length = 0;
    const component = unpackComponentFiles(await fetcher.fetchCode(`${tree.origin}/cycle/a.mjs`));
    expect(Object.keys(component?.files ?? {}).sort()).toEqual(["a.mjs", "b.mjs"]);
    expect(tree.requested).toEqual(["/cycle/a.mjs", "/cycle/b.mjs"]);
  });

  it("refuses an import above the tree's root without requesting it", async () => {
    tree.requested.length = 0;
    expect(await refusal(`${tree.origin}/hostile/passwd.mjs`)).toContain(
      'passwd.mjs: cannot import "../../../../etc/passwd": it leads out of the component\'s files',
    );
    expect(tree.requested).toEqual(["/hostile/passwd.mjs"]);
  });

  it("refuses an import redirected to another origin, and never fetches there", async () => {
    elsewhere.requested.length = 0;
    expect(await refusal(`${tree.origin}/hostile/away.mjs`)).toMatch(/redirects to another origin/);
    expect(elsewhere.requested).toEqual([]);
  });

  it("refuses a missing import naming the file and the import", async () => {
    expect(await refusal(`${tree.origin}/hostile/missing.mjs`)).toContain(
      'missing.mjs: cannot import "./nowhere": no file found',
    );
  });

  it("bounds the depth, the number of files, the bytes in all and the requests", async () => {
    const bounded = (tree: Record<string, number>) =>
      new UrlCodeFetcher({ allowPrivateAddresses: true, timeoutMs: 2000, tree });
    expect(await refusal(`${tree.origin}/deep/f0.mjs`)).toContain("imports are more than 16 deep");
    expect(unpackComponentFiles(await fetcher.fetchCode(`${tree.origin}/short/f0.mjs`))?.files).toHaveProperty(
      "f4.mjs",
    );
    expect(await refusal(`${tree.origin}/short/f0.mjs`, bounded({ maxFiles: 3 }))).toContain("more than 3 files");
    expect(await refusal(`${tree.origin}/hostile/big.mjs`, bounded({ maxBytes: 1000 }))).toMatch(
      /larger than|more than 1000 bytes/,
    );
    expect(await refusal(`${tree.origin}/short/f0.mjs`, bounded({ maxRequests: 3 }))).toContain("more than 3 requests");
  });
});
