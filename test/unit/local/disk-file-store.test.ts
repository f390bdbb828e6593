import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DiskFileStore, FILE_URL_PATH } from "#adapters/local/disk-file-store";
import { LocalSecrets } from "#adapters/local/local-secrets";
import { isDomainError } from "#core/errors";

const BLOCK = 4096;

/** A project's File Store on a real folder (decision 560): tokens, writes, listings, removal, the bound. */
describe("DiskFileStore", () => {
  let dataDir: string;
  let now: number;
  let store: DiskFileStore;
  const body = (text: string | Buffer) => Readable.from([Buffer.from(text)]);
  const token = (url: string) => FILE_URL_PATH.exec(new URL(url).pathname)?.[1] as string;
  const text = async (project: string, path: string) => {
    const file = await store.read(project, path);
    if (!file) return undefined;
    const chunks: Buffer[] = [];
    for await (const chunk of file.stream) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString();
  };
  const failure = async (work: Promise<unknown>) => {
    try {
      await work;
    } catch (error) {
      return isDomainError(error) ? `${error.code}: ${error.message}` : String(error);
    }
    return "no error";
  };

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "sluice-files-"));
    now = 1_000_000;
    store = new DiskFileStore({
      dataDir,
      secrets: await LocalSecrets.fromDataDir(dataDir, undefined),
      publicUrl: () => "http://127.0.0.1:4000/",
      now: () => now,
      maxProjectBytes: 4 * BLOCK,
    });
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  it("makes a URL to read and one to write, each opening to its own method, project and path, until it expires", async () => {
    const urls = await store.urls("proj_a", "reports/q 1.csv", now + 1000);
    expect(urls.getUrl).toMatch(/^http:\/\/127\.0\.0\.1:4000\/files\/f1\.1001000\.[A-Za-z0-9_.-]+\/q%201\.csv$/);
    expect(await store.openToken(token(urls.getUrl))).toEqual({
      project: "proj_a",
      path: "reports/q 1.csv",
      method: "GET",
    });
    expect(await store.openToken(token(urls.putUrl))).toEqual({
      project: "proj_a",
      path: "reports/q 1.csv",
      method: "PUT",
    });
    // The expiry in clear cannot be moved: the sealed one must match it.
    const moved = token(urls.getUrl).replace("f1.1001000.", "f1.9001000.");
    expect(await store.openToken(moved)).toEqual({ refused: "this file URL is not valid" });
    const flipped = token(urls.getUrl);
    const last = flipped.at(-2) === "A" ? "B" : "A";
    expect(await store.openToken(`${flipped.slice(0, -2)}${last}${flipped.slice(-1)}`)).toEqual({
      refused: "this file URL is not valid",
    });
    expect(await store.openToken("f1.99999999999.garbage")).toEqual({ refused: "this file URL is not valid" });
    now += 1001;
    expect(await store.openToken(token(urls.getUrl))).toEqual({
      refused: "this file URL has expired: ask the file for a new one",
    });
  });

  it("writes, replaces, lists in name order with pages, and removes files with the folders they leave empty", async () => {
    await store.write("proj_a", "b/two.txt", body("22"), 2);
    await store.write("proj_a", "b/one.txt", body("1"), undefined);
    await store.write("proj_a", "a.txt", body("first"), 5);
    await store.write("proj_a", "a.txt", body("second"), 6);
    expect(await text("proj_a", "a.txt")).toBe("second");
    expect(await text("proj_b", "a.txt")).toBeUndefined();
    const root = await store.list("proj_a", "", undefined, 10);
    expect(root.entries.map(({ path, type, size }) => [path, type, size])).toEqual([
      ["a.txt", "file", 6],
      ["b", "directory", undefined],
    ]);
    const first = await store.list("proj_a", "b", undefined, 1);
    expect(first).toEqual({
      entries: [expect.objectContaining({ path: "b/one.txt", name: "one.txt" })],
      next: "one.txt",
    });
    const second = await store.list("proj_a", "b", first.next, 1);
    expect(second).toEqual({ entries: [expect.objectContaining({ path: "b/two.txt", size: 2 })] });
    expect(await store.list("proj_a", "nothing/here", undefined, 10)).toEqual({ entries: [] });
    expect(await store.list("proj_a", "a.txt", undefined, 10)).toEqual({ entries: [] });
    await store.remove("proj_a", "b/one.txt");
    expect(await text("proj_a", "b/one.txt")).toBeUndefined();
    // Again: nothing there, nothing happens (and nothing is given back twice).
    await store.remove("proj_a", "b/one.txt");
    await store.remove("proj_a", "b/two.txt");
    expect(readdirSync(join(dataDir, "file-stores", "proj_a"))).toEqual(["a.txt"]);
    expect(await store.usageOf("proj_a")).toBe(BLOCK);
    expect(statSync(join(dataDir, "file-stores", "proj_a", "a.txt")).mode & 0o777).toBe(0o600);
  });

  it("refuses a file where a folder is and a folder where a file is, changing nothing", async () => {
    await store.write("proj_a", "x/y.txt", body("y"), 1);
    expect(await failure(store.write("proj_a", "x", body("x"), 1))).toBe(
      'conflict: the File Store has a folder at "x": delete the files in it first',
    );
    expect(await failure(store.write("proj_a", "x/y.txt/z", body("z"), 1))).toBe(
      'conflict: the File Store has a file at "x/y.txt", where "x/y.txt/z" needs a folder',
    );
    expect(await text("proj_a", "x/y.txt")).toBe("y");
    expect(readdirSync(join(dataDir, "file-stores", ".incoming"))).toEqual([]);
  });

  it("bounds a project in 4 KiB blocks, counting a replaced file once, and refuses a body of another length than declared", async () => {
    expect(await failure(store.write("proj_a", "c", body("ab"), 3))).toBe(
      "validation: the upload was 2 bytes, not the 3 its Content-Length said",
    );
    await store.write("proj_a", "a", body("x".repeat(8000)), 8000);
    expect(await store.usageOf("proj_a")).toBe(2 * BLOCK);
    expect(await failure(store.write("proj_a", "b", body("x".repeat(9000)), 9000))).toMatch(
      /^payload_too_large: the project's File Store may hold at most 16384 bytes in all/,
    );
    // Undeclared, the bound is found while the body streams in.
    expect(await failure(store.write("proj_a", "b", body("x".repeat(9000)), undefined))).toMatch(/^payload_too_large/);
    // Replacing a file frees its own blocks first; another project has its own bound.
    await store.write("proj_a", "a", body("x".repeat(4 * BLOCK)), 4 * BLOCK);
    await store.write("proj_b", "a", body("x".repeat(4 * BLOCK)), 4 * BLOCK);
    expect(await store.list("proj_a", "", undefined, 10)).toEqual({
      entries: [expect.objectContaining({ path: "a", size: 4 * BLOCK })],
    });
    // A removal gives the blocks back.
    await store.remove("proj_a", "a");
    expect(await store.usageOf("proj_a")).toBe(0);
    await store.write("proj_a", "c", body("x".repeat(12000)), 12000);
    expect(readdirSync(join(dataDir, "file-stores", ".incoming"))).toEqual([]);
  });

  it("counts empty files and folders as a block each, so they are not free", async () => {
    await store.write("proj_a", "d/e/empty", body(""), 0);
    expect(await store.usageOf("proj_a")).toBe(3 * BLOCK);
    await store.write("proj_a", "d/second", body(""), 0);
    expect(await failure(store.write("proj_a", "d/third", body(""), 0))).toMatch(/^payload_too_large/);
    // Deleting gives back the file's block and those of the folders it leaves empty.
    await store.remove("proj_a", "d/e/empty");
    expect(await store.usageOf("proj_a")).toBe(2 * BLOCK);
  });

  it("counts uploads in flight together: two at once cannot pass the bound between them", async () => {
    const first = new PassThrough();
    const writing = store.write("proj_a", "one", first, undefined);
    first.write(Buffer.alloc(3 * BLOCK));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await failure(store.write("proj_a", "two", body(Buffer.alloc(2 * BLOCK)), undefined))).toMatch(
      /^payload_too_large/,
    );
    first.end();
    await writing;
    expect(await store.usageOf("proj_a")).toBe(3 * BLOCK);
  });

  it("counts what a project already held when the server started, and clears unfinished uploads", async () => {
    await store.write("proj_a", "d/a", body("x".repeat(8000)), 8000);
    const left = join(dataDir, "file-stores", ".incoming", "cut-short");
    writeFileSync(left, "half an upload");
    const restarted = new DiskFileStore({
      dataDir,
      secrets: await LocalSecrets.fromDataDir(dataDir, undefined),
      publicUrl: () => "http://127.0.0.1:4000",
      now: () => now,
      maxProjectBytes: 4 * BLOCK,
    });
    await restarted.clearIncoming(() => {});
    expect(existsSync(left)).toBe(false);
    expect(await restarted.usageOf("proj_a")).toBe(3 * BLOCK);
    expect(await failure(restarted.write("proj_a", "b", body("x".repeat(5000)), 5000))).toMatch(/^payload_too_large/);
  });

  it("never reaches outside a project's folder, whatever the path or project id", async () => {
    writeFileSync(join(dataDir, "secret.txt"), "not yours");
    for (const [project, path] of [
      ["proj_a", "../../secret.txt"],
      ["..", "secret.txt"],
      ["proj_a/..", "secret.txt"],
      ["", "secret.txt"],
    ] as const) {
      expect(await failure(store.read(project, path))).toMatch(/^validation: /);
      expect(await failure(store.write(project, path, body("x"), 1))).toMatch(/^validation: /);
    }
    expect(statSync(join(dataDir, "secret.txt")).size).toBe(9);
  });
});
