import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { clearTmpRoot, newTmpFolder, removeTmpFolder, tmpUsage } from "#adapters/local/sandbox-tmp";

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "sluice-tmp-unit-"));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

describe("a sandbox process's /tmp folder", () => {
  it("is made under the root for this user only, and removed with what it holds", async () => {
    const folder = newTmpFolder(join(root, "tmp"));
    expect(folder.startsWith(join(root, "tmp", "p-"))).toBe(true);
    expect(statSync(join(root, "tmp")).mode & 0o777).toBe(0o700);
    expect(statSync(folder).mode & 0o777).toBe(0o700);
    mkdirSync(join(folder, "a", "b"), { recursive: true });
    writeFileSync(join(folder, "a", "b", "f"), "x");
    await removeTmpFolder(folder);
    expect(existsSync(folder)).toBe(false);
    await removeTmpFolder(folder); // Gone already: no error.
  });

  it("is cleared with every other folder at a host's start", () => {
    const a = newTmpFolder(root);
    const b = newTmpFolder(root);
    writeFileSync(join(a, "f"), "x");
    clearTmpRoot(root);
    expect([existsSync(a), existsSync(b), existsSync(root)]).toEqual([false, false, false]);
    clearTmpRoot(root); // Nothing there: no error.
  });
});

describe("tmpUsage", () => {
  it("counts the blocks on disk of every file, nested folders included", async () => {
    const folder = newTmpFolder(root);
    mkdirSync(join(folder, "x", "y"), { recursive: true });
    writeFileSync(join(folder, "a"), Buffer.alloc(10_000, 1));
    writeFileSync(join(folder, "x", "y", "b"), Buffer.alloc(20_000, 1));
    const onDisk = [join(folder, "a"), join(folder, "x", "y", "b")].reduce(
      (sum, f) => sum + statSync(f).blocks * 512,
      0,
    );
    expect(await tmpUsage(folder, 1024 * 1024)).toEqual({ bytes: onDisk, entries: 4, over: false });
    expect(onDisk).toBeGreaterThanOrEqual(30_000);
  });

  it("stops counting once over the bytes or the entries it allows", async () => {
    const folder = newTmpFolder(root);
    for (let i = 0; i < 5; i++) writeFileSync(join(folder, `f${i}`), Buffer.alloc(8192, 1));
    expect(await tmpUsage(folder, 10_000)).toMatchObject({ over: true, entries: 2 });
    expect(await tmpUsage(folder, 1024 * 1024, 3)).toMatchObject({ over: true, entries: 4 });
    expect(await tmpUsage(folder, 1024 * 1024, 5)).toMatchObject({ over: false, entries: 5 });
  });

  it("counts a sparse file by what it holds, and a missing folder as empty", async () => {
    const folder = newTmpFolder(root);
    const sparse = join(folder, "sparse");
    writeFileSync(sparse, "");
    // A 1 GiB file that holds nothing.
    truncateSync(sparse, 1024 * 1024 * 1024);
    expect((await tmpUsage(folder, 1024 * 1024)).over).toBe(false);
    expect(await tmpUsage(join(root, "gone"), 1)).toEqual({ bytes: 0, entries: 0, over: false });
    expect(readdirSync(folder)).toEqual(["sparse"]);
  });
});
