import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { unpackPackageTarball } from "#adapters/npm/package-tarball";
import { registryDirectory } from "#adapters/registry-directory";
import { DEFAULT_REGISTRY_DIR, registryFiles } from "#adapters/registry-files";
import { addRegistryPackage, checkPackageSpec } from "../../../bin/cli/registry-install.ts";
import { packageTarball } from "../../support/npm-registry-fixture.ts";

/*
 * `sluice registry add` below the command line (test/e2e/cli-commands.test.ts runs the command
 * itself): package tarballs built in memory, in the registry's layout or hostile, added to a
 * temporary registry directory, which registryDirectory then serves as local mode does.
 */

const APP = `export default {
  type: "app",
  app: "note_tools",
  methods: {
    shout(text) {
      return text.toUpperCase();
    },
  },
};
`;
const ACTION = `import noteTools from "../../note_tools.app.mjs";

export default {
  key: "note_tools-shout",
  name: "Shout",
  version: "0.0.1",
  type: "action",
  props: { noteTools, text: { type: "string" } },
  async run() {
    return this.noteTools.shout(this.text);
  },
};
`;
const manifest = (name: string, version = "0.1.0") => JSON.stringify({ name, version, main: "note_tools.app.mjs" });
const noteTools = (version = "0.1.0", extra: Record<string, string> = {}) =>
  packageTarball({
    "package.json": manifest("@pipedream/note_tools", version),
    "note_tools.app.mjs": APP,
    "actions/shout/shout.mjs": ACTION,
    ...extra,
  });

/** A registry directory and a tarball file in a fresh temporary folder. */
function setup(tarball: Buffer) {
  const work = mkdtempSync(join(tmpdir(), "sluice-registry-add-"));
  writeFileSync(join(work, "package.tgz"), tarball);
  return {
    work,
    dir: join(work, "registry"),
    add: (spec = "package.tgz") => addRegistryPackage(spec, join(work, "registry"), { cwd: work }),
  };
}

const shipped = registryFiles(DEFAULT_REGISTRY_DIR);

describe("addRegistryPackage", () => {
  it("writes the package as its app folder, and the directory serves its components by key, without a restart", async () => {
    const { work, dir, add } = setup(noteTools());
    const registry = registryDirectory(dir, shipped);
    // Indexed before the package is there (the directory does not exist yet).
    expect(await registry.readCode("note_tools-shout")).toBeUndefined();
    const added = await add();
    expect(added).toMatchObject({
      package: "@pipedream/note_tools",
      version: "0.1.0",
      dir: join(dir, "note_tools"),
      replaced: false,
      components: [{ key: "note_tools-shout", path: join(dir, "note_tools", "actions", "shout", "shout.mjs") }],
      shadowed: [],
    });
    expect(readdirSync(dir)).toEqual(["note_tools"]);
    const code = await registry.readCode("note_tools-shout");
    // Served with the app file it imports (a packed multi-file component).
    expect(code).toContain("note_tools.app.mjs");
    expect(code).toContain("toUpperCase");

    // A second app folder moved into the existing directory is indexed at the next unknown key.
    writeFileSync(
      join(work, "more.tgz"),
      packageTarball({
        "package.json": manifest("@pipedream/note_more"),
        "sources/new-note/new-note.mjs": 'export default { key: "note_more-new-note", type: "source", run() {} };',
      }),
    );
    await addRegistryPackage("more.tgz", dir, { cwd: work });
    expect(await registry.readCode("note_more-new-note")).toContain("note_more-new-note");
  });

  it("serves a component added by hand inside an app already indexed, or written into a folder that was empty, without a restart", async () => {
    const { dir, add } = setup(noteTools());
    await add();
    const registry = registryDirectory(dir, shipped);
    // An empty folder where a component will be written, there when the index is made.
    mkdirSync(join(dir, "note_tools", "sources", "new-line"), { recursive: true });
    expect(await registry.readCode("note_tools-shout")).toContain("toUpperCase");
    expect(await registry.readCode("note_tools-whisper")).toBeUndefined();

    mkdirSync(join(dir, "note_tools", "actions", "whisper"));
    writeFileSync(
      join(dir, "note_tools", "actions", "whisper", "whisper.mjs"),
      ACTION.replace("note_tools-shout", "note_tools-whisper").replace("Shout", "Whisper"),
    );
    expect(await registry.readCode("note_tools-whisper")).toContain("note_tools-whisper");

    writeFileSync(
      join(dir, "note_tools", "sources", "new-line", "new-line.mjs"),
      'export default { key: "note_tools-new-line", type: "source", run() {} };',
    );
    expect(await registry.readCode("note_tools-new-line")).toContain("note_tools-new-line");
  });

  it("replaces an app folder of the same name whole, and warns of a key another app serves", async () => {
    const { work, dir, add } = setup(noteTools());
    await add();
    writeFileSync(
      join(work, "v2.tgz"),
      noteTools("0.2.0", { "actions/other/other.mjs": 'export default { key: "other-thing", type: "action" };' }),
    );
    mkdirSync(join(dir, "aaa_first", "actions", "thing"), { recursive: true });
    writeFileSync(join(dir, "aaa_first", "actions", "thing", "thing.mjs"), 'export default { key: "other-thing" };');
    writeFileSync(join(dir, "note_tools", "stale.txt"), "from the old version");
    const added = await add("v2.tgz");
    expect(added).toMatchObject({ version: "0.2.0", replaced: true });
    expect(added.shadowed).toEqual([
      { key: "other-thing", servedFrom: join(dir, "aaa_first", "actions", "thing", "thing.mjs") },
    ]);
    expect(existsSync(join(dir, "note_tools", "stale.txt"))).toBe(false);
    // Nothing staged is left beside the apps.
    expect(readdirSync(dir).sort()).toEqual(["aaa_first", "note_tools"]);
  });

  it("installs into components/ of a directory that is a registry checkout", async () => {
    const { dir, add } = setup(noteTools());
    mkdirSync(join(dir, "components"), { recursive: true });
    expect((await add()).dir).toBe(join(dir, "components", "note_tools"));
  });

  it("refuses a package with no component with a key, leaving the directory as it was", async () => {
    const { dir, add } = setup(
      packageTarball({
        "package.json": manifest("@pipedream/note_tools"),
        "note_tools.app.mjs": APP,
        "actions/shout/shout.mjs": "export default { name: 'no key here' };",
      }),
    );
    await expect(add()).rejects.toThrow(/@pipedream\/note_tools holds no component with a key/);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("refuses path tricks: a file outside package/, a package name that is no app folder; and skips links", async () => {
    const outside = setup(noteTools("0.1.0", { "../../../escaped.mjs": "boom" }));
    await expect(outside.add()).rejects.toThrow(/names a file outside itself: "package\/..\/..\/..\/escaped.mjs"/);
    expect(existsSync(join(outside.work, "escaped.mjs"))).toBe(false);

    for (const name of ["@pipedream/..", "@pipedream/Note Tools", "@pipedream/components", "../x"]) {
      const tricky = setup(packageTarball({ "package.json": manifest(name), "actions/shout/shout.mjs": ACTION }));
      await expect(tricky.add(), name).rejects.toThrow(/registry add: the package (name|has no package.json)/);
      expect(existsSync(tricky.dir) ? readdirSync(tricky.dir) : []).toEqual([]);
    }

    const linked = setup(
      packageTarball(
        { "package.json": manifest("@pipedream/note_tools"), "actions/shout/shout.mjs": ACTION },
        { "note_tools.app.mjs": "/etc/passwd" },
      ),
    );
    await linked.add();
    expect(existsSync(join(linked.dir, "note_tools", "note_tools.app.mjs"))).toBe(false);
    expect(readFileSync(join(linked.dir, "note_tools", "actions", "shout", "shout.mjs"), "utf8")).toBe(ACTION);
  });

  it("says what is wrong with a spec that is neither a package name nor a tarball, or a missing tarball", async () => {
    for (const spec of ["Bad Name", "@pipedream/..", "@pipedream/a/b", "", "x@"])
      expect(() => checkPackageSpec(spec), spec).toThrow(
        /is not an npm package name \(such as @pipedream\/helper_functions\) or a .tgz file/,
      );
    expect(checkPackageSpec("@pipedream/helper_functions@0.3.13")).toEqual({
      name: "@pipedream/helper_functions",
      version: "0.3.13",
    });
    expect(checkPackageSpec("./pkg.tgz")).toBeUndefined();
    await expect(setup(noteTools()).add("missing.tgz")).rejects.toThrow(
      "registry add: cannot read missing.tgz (ENOENT)",
    );
  });
});

describe("unpackPackageTarball", () => {
  it("reads a long path from a pax header, and refuses what is not a gzipped tarball", () => {
    const long = `${"a".repeat(80)}/${"b".repeat(60)}.mjs`;
    const body = Buffer.from("x");
    const pax = Buffer.from(`${String(`path=package/${long}\n`.length + 4)} path=package/${long}\n`);
    const header = (name: string, type: string, size: number) => {
      const block = Buffer.alloc(512);
      block.write(name, 0, 100);
      block.write(`${size.toString(8).padStart(11, "0")}\0`, 124, 12);
      block.write(type, 156);
      return block;
    };
    const pad = (data: Buffer) => Buffer.concat([data, Buffer.alloc((512 - (data.length % 512)) % 512)]);
    const tar = Buffer.concat([
      header("PaxHeader", "x", pax.length),
      pad(pax),
      header("package/short-name", "0", body.length),
      pad(body),
      Buffer.alloc(1024),
    ]);
    expect([...unpackPackageTarball(gzipSync(tar)).keys()]).toEqual([long]);
    expect(() => unpackPackageTarball(Buffer.from("not gzip"))).toThrow("not a gzipped tarball");
  });
});
