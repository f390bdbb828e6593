import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { lockDataDir, prepareDataDir, reasonOf } from "#adapters/local/data-dir";

const freshDir = () => mkdtempSync(join(tmpdir(), "sluice-lock-"));

describe("lockDataDir", () => {
  it("refuses a second hold in the same process, naming the data dir, until the first is released", () => {
    const dataDir = freshDir();
    const first = lockDataDir(dataDir);
    expect(() => lockDataDir(dataDir)).toThrow(`the data dir ${dataDir} is in use by another Sluice server`);
    first.release();
    const again = lockDataDir(dataDir);
    again.release();
  });

  it("holds one data dir, not others", () => {
    const one = lockDataDir(freshDir());
    const other = lockDataDir(freshDir());
    one.release();
    other.release();
  });
});

describe("reasonOf", () => {
  it("says in words why a file-system or SQLite operation failed", () => {
    expect(reasonOf(Object.assign(new Error("x"), { code: "EROFS" }))).toBe("the file system is read-only (EROFS)");
    expect(reasonOf(Object.assign(new Error("x"), { code: "SQLITE_READONLY_DIRECTORY" }))).toBe(
      "it is read-only (SQLITE_READONLY_DIRECTORY)",
    );
    expect(reasonOf(new Error("something else"))).toBe("something else");
  });
});

describe("prepareDataDir", () => {
  it("names a path that is a file", () => {
    expect(() => prepareDataDir(__filename)).toThrow(
      `cannot use the data dir ${__filename}: it exists and is not a folder`,
    );
  });
});
