import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
// @ts-expect-error: plain JavaScript without types (it runs before any loader).
import { build, CACHE_DIR, currentBuild, fileStamps, isFresh, ROOT } from "../../../bin/launch.mjs";

/**
 * How `sluice` runs its build of bin/sluice.ts (bin/launch.mjs, decision 568): a build is used
 * only while every file it was built from is unchanged, and each module keeps its own URL.
 */
const root = mkdtempSync(join(tmpdir(), "sluice-launch-"));
const cacheDir = join(root, "cache");
afterAll(() => rmSync(root, { recursive: true, force: true }));

function project(files: Record<string, string>) {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), text);
  }
}

/** Moves a file's modification time, as an editor's save does (a save within the same ms is not told apart). */
function touch(path: string, secondsAgo = 0) {
  const at = new Date(Date.now() - secondsAgo * 1000);
  utimesSync(join(root, path), at, at);
}

type Stamps = Record<string, [number, number] | null>;
const launch = {
  build: build as (options: { root: string; cacheDir: string; entry: string }) => Promise<string>,
  currentBuild: currentBuild as (cacheDir: string, root: string) => string | undefined,
  fileStamps: fileStamps as (root: string, paths: string[]) => Stamps,
  isFresh: isFresh as (root: string, stamps: Stamps) => boolean,
};

describe("bin/launch.mjs", () => {
  it("tells a file changed by its time or size, and a missing file from a present one", () => {
    project({ "a.txt": "one", "b.txt": "two" });
    touch("a.txt", 10);
    touch("b.txt", 10);
    const stamps = launch.fileStamps(root, ["a.txt", "b.txt", "gone.txt"]);
    expect(stamps["gone.txt"]).toBeNull();
    const present = { "a.txt": stamps["a.txt"] ?? null, "b.txt": stamps["b.txt"] ?? null };
    expect(launch.isFresh(root, present)).toBe(true);
    // A missing file never counts as unchanged.
    expect(launch.isFresh(root, stamps)).toBe(false);
    touch("a.txt");
    expect(launch.isFresh(root, present)).toBe(false);
    // Another size at the same time (an edit within a clock tick) is a change too.
    const at = new Date(Date.now() - 5_000);
    utimesSync(join(root, "a.txt"), at, at);
    const now = launch.fileStamps(root, ["a.txt"]);
    writeFileSync(join(root, "a.txt"), "three");
    utimesSync(join(root, "a.txt"), at, at);
    expect(launch.fileStamps(root, ["a.txt"])["a.txt"]?.[0]).toBe(now["a.txt"]?.[0]);
    expect(launch.isFresh(root, now)).toBe(false);
  });

  it("builds an entry split by its dynamic imports, each module with its own import.meta.url, and builds again after an edit", async () => {
    project({
      "package.json": '{ "type": "module" }',
      "tsconfig.json": "{}",
      "bin/launch.mjs": "// stands for the launcher",
      "bin/entry.ts": `#!/usr/bin/env node
        const here: string = import.meta.url;
        const text = "import.meta.url stays in a string";
        const { where } = await import("../lib/deep/module.ts");
        const { helperUrl } = await import("../lib/helper.mjs");
        console.log(JSON.stringify({ here, text, where: where(), helper: helperUrl(), version: (await import("../lib/deep/version.ts")).VERSION }));`,
      "lib/helper.mjs": "export const helperUrl = () => import.meta.url;",
      "lib/deep/module.ts": "export const where = (): string => new URL('./data.json', import.meta.url).pathname;",
      "lib/deep/version.ts": 'export const VERSION = "1";',
    });
    for (const path of [
      "bin/entry.ts",
      "lib/deep/module.ts",
      "lib/deep/version.ts",
      "package.json",
      "tsconfig.json",
      "bin/launch.mjs",
    ]) {
      touch(path, 10);
    }
    expect(launch.currentBuild(cacheDir, root)).toBeUndefined();
    const built = await launch.build({ root, cacheDir, entry: "bin/entry.ts" });
    expect(launch.currentBuild(cacheDir, root)).toBe(built);
    // Split: the lazily imported modules are chunks of their own.
    expect(readdirSync(join(built, "..")).filter((name) => name.endsWith(".mjs")).length).toBeGreaterThan(1);

    const run = () =>
      JSON.parse(
        execFileSync(process.execPath, [launch.currentBuild(cacheDir, root) as string], {
          cwd: root,
          encoding: "utf8",
        }),
      );
    expect(run()).toEqual({
      here: `file://${join(root, "bin", "entry.ts")}`,
      text: "import.meta.url stays in a string",
      where: join(root, "lib", "deep", "data.json"),
      helper: `file://${join(root, "lib", "helper.mjs")}`,
      version: "1",
    });

    // An edit of any module (here one only imported lazily) makes the build stale, and a new one runs it.
    writeFileSync(join(root, "lib/deep/version.ts"), 'export const VERSION = "2";');
    touch("lib/deep/version.ts", 5);
    expect(launch.currentBuild(cacheDir, root)).toBeUndefined();
    const rebuilt = await launch.build({ root, cacheDir, entry: "bin/entry.ts" });
    expect(rebuilt).not.toBe(built);
    expect(run().version).toBe("2");
    // So does a change of how it is built, though nothing imports those files.
    touch("tsconfig.json", 1);
    expect(launch.currentBuild(cacheDir, root)).toBeUndefined();

    // A build is pruned once unused for a week; using one makes it recent again.
    const weekAgo = new Date(Date.now() - 8 * 24 * 3600 * 1000);
    mkdirSync(join(cacheDir, "build-1-1"));
    utimesSync(join(cacheDir, "build-1-1"), weekAgo, weekAgo);
    const newest = await launch.build({ root, cacheDir, entry: "bin/entry.ts" });
    utimesSync(join(newest, ".."), weekAgo, weekAgo);
    expect(launch.currentBuild(cacheDir, root)).toBe(newest);
    await launch.build({ root, cacheDir, entry: "bin/entry.ts" });
    expect(readdirSync(cacheDir)).not.toContain("build-1-1");
    expect(readdirSync(cacheDir)).toContain(basename(join(newest, "..")));
  });

  it("never counts a file saved while it was being built as built", async () => {
    project({
      "package.json": '{ "type": "module" }',
      "tsconfig.json": "{}",
      "bin/launch.mjs": "//",
      "bin/now.ts": "console.log(1);",
    });
    // Saved "after" the build started: its stamp cannot be trusted to be what was read.
    const future = new Date(Date.now() + 60_000);
    utimesSync(join(root, "bin/now.ts"), future, future);
    await launch.build({ root, cacheDir, entry: "bin/now.ts" });
    expect(launch.currentBuild(cacheDir, root)).toBeUndefined();
    const pointer = JSON.parse(readFileSync(join(cacheDir, "current.json"), "utf8"));
    expect(pointer.stamps["bin/now.ts"]).toEqual([-1, -1]);
  });

  it("keeps its builds in the checkout's node_modules, where Node finds the packages they leave external", () => {
    expect(CACHE_DIR).toBe(join(ROOT as string, "node_modules", ".cache", "sluice"));
    // A build's folder is below node_modules/.cache: its imports of packages resolve up to node_modules.
    const fromBuild = createRequire(join(CACHE_DIR as string, "build-x", "sluice.mjs"));
    expect(fromBuild.resolve("esbuild")).toBe(createRequire(join(ROOT as string, "package.json")).resolve("esbuild"));
  });
});
