import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LocalObjectSink } from "#adapters/local/local-object-sink";

let root: string;
let dataDir: string;

/** Every file below `dir`, relative to it. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => !entry.isDirectory())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

beforeEach(async () => {
  // The data dir sits inside a folder of its own, so a file written beside it would be seen.
  root = await mkdtemp(join(tmpdir(), "sluice-objects-"));
  dataDir = join(root, "data");
  await mkdir(dataDir);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("LocalObjectSink", () => {
  it("writes <data dir>/s3/<bucket>/<key>, replacing an object written again", async () => {
    const sink = new LocalObjectSink(dataDir, ["orders"]);
    expect(await sink.putObject("orders", "a/b/run_1-0.json", '{"n":1}', "application/json")).toEqual({
      stored: true,
    });
    expect(await sink.putObject("orders", "a/b/run_1-0.json", '{"n":2}', "application/json")).toEqual({
      stored: true,
    });
    expect(await readFile(join(dataDir, "s3", "orders", "a", "b", "run_1-0.json"), "utf8")).toBe('{"n":2}');
    expect(await filesUnder(root)).toEqual(["data/s3/orders/a/b/run_1-0.json"]);
  });

  it.each([
    ["a parent segment", "../escaped.json"],
    ["a parent segment deeper down", "a/../../escaped.json"],
    ["parents up to the data dir", "../../../escaped.json"],
    ["an absolute path", "/tmp/escaped.json"],
    ["an absolute path with parents", "/tmp/../tmp/escaped.json"],
    ["a NUL character", "a\0/../../escaped.json"],
    ["a . segment", "./a.json"],
    ["an empty segment", "a//b.json"],
    ["an empty key", ""],
    ["a key over 1024 bytes", "k".repeat(1025)],
  ])("refuses a key with %s and writes nothing anywhere", async (_what, key) => {
    const sink = new LocalObjectSink(dataDir, ["orders"]);
    const result = await sink.putObject("orders", key, "{}", "application/json");
    expect(result).toHaveProperty("error");
    expect(await filesUnder(root)).toEqual([]);
  });

  it("refuses a bucket not allowed, and never allows a bucket name that is a path", async () => {
    const sink = new LocalObjectSink(dataDir, ["orders", "..", "../data", "a/b", "UPPER"]);
    for (const bucket of ["other", "..", "../data", "a/b", "UPPER", ""]) {
      expect(sink.allowsBucket(bucket)).toBe(false);
      expect(await sink.putObject(bucket, "x.json", "{}", "application/json")).toHaveProperty("error");
    }
    expect(await filesUnder(root)).toEqual([]);
  });

  it("replaces a link found at the key's place rather than writing through it", async () => {
    const sink = new LocalObjectSink(dataDir, ["orders"]);
    const outside = join(root, "outside.txt");
    await writeFile(outside, "untouched");
    await mkdir(join(dataDir, "s3", "orders"), { recursive: true });
    await symlink(outside, join(dataDir, "s3", "orders", "x.json"));
    expect(await sink.putObject("orders", "x.json", '{"n":1}', "application/json")).toEqual({ stored: true });
    expect(await readFile(outside, "utf8")).toBe("untouched");
    expect((await lstat(join(dataDir, "s3", "orders", "x.json"))).isSymbolicLink()).toBe(false);
  });

  it("answers an error, not a rejection, when the file cannot be written", async () => {
    const sink = new LocalObjectSink(dataDir, ["orders"]);
    await sink.putObject("orders", "a", "{}", "application/json");
    // `a` is a file now: it cannot be a folder too.
    const result = await sink.putObject("orders", "a/b.json", "{}", "application/json");
    expect(result).toEqual({ error: expect.stringMatching(/could not be written/) });
  });
});
