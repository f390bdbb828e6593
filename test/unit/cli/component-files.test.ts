import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { COMPONENT_LIMITS, readComponent, relativeImports } from "../../../bin/cli/component-files.ts";

/** Writes `files` (path relative to a new folder -> content) and returns the folder. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "sluice-cli-tree-"));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

// The registry's layout: components/<app>/<app>.app.mjs, common/, sources/<name>/<name>.mjs, a package.json per app.
const REGISTRY = {
  "components/acme/package.json": '{"name":"@pipedream/acme","version":"0.1.0"}',
  "components/acme/acme.app.mjs":
    'import { axios } from "@pipedream/platform";\nexport default { type: "app", app: "acme" };\n',
  "components/acme/common/base-polling.mjs":
    'import acme from "../acme.app.mjs";\nimport constants from "./constants.mjs";\nexport default { props: { acme } , constants };\n',
  "components/acme/common/constants.mjs": "export default { PAGE: 50 };\n",
  "components/acme/sources/new-item/new-item.mjs": `import common from "../../common/base-polling.mjs";
import {
  helper,
} from "../../common/helpers";
export default { ...common, key: "acme-new-item", name: "New Item", version: "0.0.1", type: "source", async run() { helper(); } };
`,
  "components/acme/common/helpers.mjs": "export const helper = () => 1;\n",
};

describe("the relative imports of a module", () => {
  it("finds static, multi-line, re-export, dynamic and require imports, and leaves packages to the server", () => {
    const text = `import a from "./a.mjs";
import {
  b,
} from '../b.mjs';
import "./side-effect.mjs";
export * from "./c.mjs";
export { d } from "./d.mjs";
const e = await import("./e.mjs");
const f = require("../f.js");
import axios from "axios";
import { x } from "@pipedream/platform";`;
    expect(relativeImports(text).sort()).toEqual(
      ["./a.mjs", "../b.mjs", "./side-effect.mjs", "./c.mjs", "./d.mjs", "./e.mjs", "../f.js"].sort(),
    );
  });
});

describe("reading a component from disk", () => {
  it("sends a file that imports nothing relatively as component_code", async () => {
    const root = tree({ "hello.mjs": 'import axios from "axios";\nexport default { name: "Hello" };\n' });
    const read = await readComponent(join(root, "hello.mjs"));
    expect(read.body).toEqual({ component_code: 'import axios from "axios";\nexport default { name: "Hello" };\n' });
    expect(read.read).toEqual([join(root, "hello.mjs")]);
  });

  it("reads a registry source with the files it imports, named from the app's folder (its package.json)", async () => {
    const root = tree(REGISTRY);
    const read = await readComponent(join(root, "components/acme/sources/new-item/new-item.mjs"));
    expect(read.root).toBe(join(root, "components/acme"));
    expect(read.body).toEqual({
      component_entry: "sources/new-item/new-item.mjs",
      component_files: {
        "sources/new-item/new-item.mjs": REGISTRY["components/acme/sources/new-item/new-item.mjs"],
        "common/base-polling.mjs": REGISTRY["components/acme/common/base-polling.mjs"],
        "common/helpers.mjs": REGISTRY["components/acme/common/helpers.mjs"],
        "common/constants.mjs": REGISTRY["components/acme/common/constants.mjs"],
        "acme.app.mjs": REGISTRY["components/acme/acme.app.mjs"],
      },
    });
    // Each file once, though two import the app file's folder neighbours.
    expect(read.read).toHaveLength(5);
  });

  it("takes the root from --root, and reads cycles once", async () => {
    const root = tree({
      "src/a.mjs": 'import b from "./b.mjs"; export default { name: "A" };',
      "src/b.mjs": 'import a from "./a.mjs"; export default 1;',
    });
    const read = await readComponent(join(root, "src/a.mjs"), { root });
    expect(read.body).toEqual({
      component_entry: "src/a.mjs",
      component_files: {
        "src/a.mjs": 'import b from "./b.mjs"; export default { name: "A" };',
        "src/b.mjs": 'import a from "./a.mjs"; export default 1;',
      },
    });
  });

  it("refuses an import that leaves the component's folder tree, reading nothing outside it", async () => {
    const root = tree({
      "secret.txt": "top secret",
      "proj/package.json": "{}",
      "proj/source.mjs": 'import s from "../secret.txt"; export default {};',
    });
    await expect(readComponent(join(root, "proj/source.mjs"))).rejects.toThrow(
      /source\.mjs imports \.\.\/secret\.txt: outside .*proj, the component's folder tree/,
    );
  });

  it("refuses a symbolic link that points out of the tree, and a link to a file outside given as the entry", async () => {
    const outside = tree({ "passwd.mjs": "export default 'root:x:0:0';" });
    const root = tree({ "package.json": "{}", "source.mjs": 'import p from "./linked.mjs"; export default {};' });
    symlinkSync(join(outside, "passwd.mjs"), join(root, "linked.mjs"));
    await expect(readComponent(join(root, "source.mjs"))).rejects.toThrow(
      /imports \.\/linked\.mjs: a link to .*outside/,
    );
    symlinkSync(join(outside, "passwd.mjs"), join(root, "entry.mjs"));
    await expect(readComponent(join(root, "entry.mjs"))).rejects.toThrow(/a link to .*outside/);
  });

  it("follows a link that stays inside the tree", async () => {
    const root = tree({
      "package.json": "{}",
      "lib/real.mjs": "export default 2;",
      "source.mjs": 'import x from "./x.mjs";',
    });
    symlinkSync(join(root, "lib/real.mjs"), join(root, "x.mjs"));
    const read = await readComponent(join(root, "source.mjs"));
    expect(read.body).toMatchObject({ component_files: { "lib/real.mjs": "export default 2;" } });
  });

  it("names a missing import and the file that imports it", async () => {
    const root = tree({ "package.json": "{}", "source.mjs": 'import x from "./common/missing.mjs";' });
    await expect(readComponent(join(root, "source.mjs"))).rejects.toThrow(
      "source.mjs imports ./common/missing.mjs: no such file",
    );
    await expect(readComponent(join(root, "nothere.mjs"))).rejects.toThrow(/nothere\.mjs no such file/);
  });

  it("finds imports as the server does: not in comments or strings, and a .js import naming a .ts file", async () => {
    const root = tree({
      "package.json": "{}",
      "source.ts": `// import old from "./removed.mjs";
/* require("./also-removed.js") */
const text = 'import x from "./in-a-string.mjs"';
import { helper } from "./util.js";
export default { run: () => helper(text) };
`,
      "util.ts": "export const helper = (x: string) => x;",
    });
    const read = await readComponent(join(root, "source.ts"));
    expect(read.body).toMatchObject({ component_entry: "source.ts" });
    expect(Object.keys((read.body as { component_files: object }).component_files).sort()).toEqual([
      "source.ts",
      "util.ts",
    ]);
  });

  it("stops at its bounds: count of files and their total size", async () => {
    const many: Record<string, string> = { "package.json": "{}" };
    const count = COMPONENT_LIMITS.files + 1;
    many["source.mjs"] = Array.from({ length: count }, (_, i) => `import "./f${i}.mjs";`).join("\n");
    for (let i = 0; i < count; i++) many[`f${i}.mjs`] = "export {};";
    await expect(readComponent(join(tree(many), "source.mjs"))).rejects.toThrow(/more than 200 files/);
    const big = tree({
      "package.json": "{}",
      "source.mjs": 'import "./big.mjs";',
      "big.mjs": "x".repeat(COMPONENT_LIMITS.totalBytes),
    });
    await expect(readComponent(join(big, "source.mjs"))).rejects.toThrow(/more than 1048576 bytes/);
  });
});
