import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  renameSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { clearTmpRoot, newTmpFolder, removeTmpFolder, tmpUsage } from "#adapters/local/sandbox-tmp";

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "sluice-tmp-unit-"));
});
// As the host clears it: Node's rmSync fails on the trees below whose paths are past PATH_MAX.
afterEach(() => expect(clearTmpRoot(root)).toBeUndefined());

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
    expect(clearTmpRoot(root)).toBeUndefined();
    expect([existsSync(a), existsSync(b), existsSync(root)]).toEqual([false, false, false]);
    expect(clearTmpRoot(root)).toBeUndefined(); // Nothing there: no error.
  });

  it("is removed whatever its child left: paths past PATH_MAX, folders made unreadable", async () => {
    const folder = newTmpFolder(root);
    deepTree(folder);
    mkdirSync(join(folder, "locked", "inner"), { recursive: true });
    writeFileSync(join(folder, "locked", "inner", "f"), "x");
    chmodSync(join(folder, "locked", "inner"), 0);
    chmodSync(join(folder, "locked"), 0o300);
    await removeTmpFolder(folder);
    expect(existsSync(folder)).toBe(false);
    // And at a start, where a failure would keep the server from starting.
    const stale = newTmpFolder(root);
    deepTree(stale);
    expect(clearTmpRoot(root)).toBeUndefined();
    expect(existsSync(root)).toBe(false);
  });
});

describe("tmpUsage", () => {
  it("counts the blocks on disk of every file and folder, nested ones included", async () => {
    const folder = newTmpFolder(root);
    mkdirSync(join(folder, "x", "y"), { recursive: true });
    writeFileSync(join(folder, "a"), Buffer.alloc(10_000, 1));
    writeFileSync(join(folder, "x", "y", "b"), Buffer.alloc(20_000, 1));
    const onDisk = [join(folder, "a"), join(folder, "x"), join(folder, "x", "y"), join(folder, "x", "y", "b")].reduce(
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

  it("counts the files its process deleted but holds open, and names that are not UTF-8", async () => {
    const folder = newTmpFolder(root);
    const held = join(folder, "held");
    const fd = openSync(held, "w");
    try {
      writeSync(fd, Buffer.alloc(64 * 1024, 1));
      unlinkSync(held);
      // This process holds it: a walk alone sees nothing.
      expect((await tmpUsage(folder, 1024 * 1024)).bytes).toBe(0);
      expect((await tmpUsage(folder, 1024 * 1024, 10_000, process.pid)).bytes).toBeGreaterThanOrEqual(64 * 1024);
    } finally {
      closeSync(fd);
    }
    const odd = Buffer.concat([Buffer.from(`${folder}/`), Buffer.from([0xff, 0x31])]);
    mkdirSync(odd);
    writeFileSync(Buffer.concat([odd, Buffer.from("/f")]), Buffer.alloc(20_000, 1));
    const usage = await tmpUsage(folder, 1024 * 1024);
    expect(usage).toMatchObject({ entries: 2, over: false });
    expect(usage.bytes).toBeGreaterThanOrEqual(20_000 + statSync(odd).blocks * 512);
  });

  it("counts a tree it cannot read whole (a path past PATH_MAX) as over", async () => {
    const folder = newTmpFolder(root);
    deepTree(folder);
    const usage = await tmpUsage(folder, 1024 * 1024 * 1024);
    expect(usage).toMatchObject({ over: true, unmeasurable: "ENAMETOOLONG" });
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

/**
 * Puts a file in `folder` whose path is past PATH_MAX (4,096): two trees of short enough paths,
 * the second moved under the first, as a child can.
 */
function deepTree(folder: string): void {
  const segment = "d".repeat(200);
  const a = join(folder, "a", ...Array<string>(12).fill(segment));
  const b = join(folder, "b", ...Array<string>(12).fill(segment));
  mkdirSync(a, { recursive: true });
  mkdirSync(b, { recursive: true });
  writeFileSync(join(b, "f"), "x");
  renameSync(join(folder, "b"), join(a, "b"));
}
