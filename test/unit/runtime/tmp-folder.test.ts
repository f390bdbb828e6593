import { describe, expect, it } from "vitest";
import { tmpPaths } from "#runtime/tmp-folder";

const FOLDER = "/data/.sluice/sandbox/tmp/p-abc123";

describe("tmpPaths: /tmp as a sandbox process names it", () => {
  const paths = tmpPaths(FOLDER);

  it("maps /tmp and what is under it to the process's folder, however the path is spelled", () => {
    expect(paths.toReal("/tmp")).toBe(FOLDER);
    expect(paths.toReal("/tmp/")).toBe(`${FOLDER}/`);
    expect(paths.toReal("/tmp/report.csv")).toBe(`${FOLDER}/report.csv`);
    expect(paths.toReal("//tmp/./a/../b.txt")).toBe(`${FOLDER}/b.txt`);
    expect(paths.toReal("/tmp/dir/")).toBe(`${FOLDER}/dir/`);
  });

  it("leaves every other path as given: the permission model judges it", () => {
    for (const path of ["/tmpx/a", "/etc/passwd", "relative/tmp/a", "tmp/a", "/var/tmp/a", "/tmp/../etc/passwd"]) {
      expect(paths.toReal(path)).toBe(path);
    }
    expect(paths.toReal(3)).toBe(3);
    expect(paths.toReal(undefined)).toBe(undefined);
  });

  it("maps file: URLs and Buffers, and leaves other URLs alone", () => {
    expect(paths.toReal(new URL("file:///tmp/a%20b.txt"))).toBe(`${FOLDER}/a b.txt`);
    const other = new URL("https://example.test/tmp/a");
    expect(paths.toReal(other)).toBe(other);
    const outside = new URL("file:///etc/hosts");
    expect(paths.toReal(outside)).toBe(outside);
    expect(paths.toReal(Buffer.from("/tmp/x"))).toEqual(Buffer.from(`${FOLDER}/x`));
    const kept = Buffer.from("/etc/x");
    expect(paths.toReal(kept)).toBe(kept);
  });

  it("takes the process's own folders as they are when the data dir is under /tmp", () => {
    const inTmp = tmpPaths("/tmp/sluice-1/sandbox/tmp/p-1", ["/tmp/sluice-1/sandbox/sources/dc_a/", "/opt/runtime"]);
    expect(inTmp.toReal("/tmp/sluice-1/sandbox/sources/dc_a/h/component.mjs")).toBe(
      "/tmp/sluice-1/sandbox/sources/dc_a/h/component.mjs",
    );
    expect(inTmp.toReal("/tmp/sluice-1/sandbox/tmp/p-1/x")).toBe("/tmp/sluice-1/sandbox/tmp/p-1/x");
    // Another source's folder is not the process's own: the name stays in its /tmp.
    expect(inTmp.toReal("/tmp/sluice-1/sandbox/sources/dc_b/h/component.mjs")).toBe(
      "/tmp/sluice-1/sandbox/tmp/p-1/sluice-1/sandbox/sources/dc_b/h/component.mjs",
    );
    expect(inTmp.toReal("/tmp/sluice-1/sandbox/sources/dc_ab")).toBe(
      "/tmp/sluice-1/sandbox/tmp/p-1/sluice-1/sandbox/sources/dc_ab",
    );
  });

  it("names the folder /tmp again in what goes back to the code", () => {
    expect(paths.toShown(`ENOENT: no such file or directory, open '${FOLDER}/missing.txt'`)).toBe(
      "ENOENT: no such file or directory, open '/tmp/missing.txt'",
    );
    expect(paths.toShown(FOLDER)).toBe("/tmp");
    expect(paths.toShown(`copy '${FOLDER}/a' -> '${FOLDER}/b'`)).toBe("copy '/tmp/a' -> '/tmp/b'");
    expect(paths.toShown("/data/.sluice/other")).toBe("/data/.sluice/other");
  });
});

describe("tmpPaths: Buffer paths are mapped byte for byte", () => {
  it("keeps a name's bytes that are not UTF-8, and spells a folder with non-ASCII characters in UTF-8", () => {
    const folder = "/data/zoë/sandbox/tmp/p-1";
    const paths = tmpPaths(folder);
    const name = Buffer.from([0xff, 0x30]);
    const given = Buffer.concat([Buffer.from("/tmp/"), name]);
    expect(paths.toReal(given)).toEqual(Buffer.concat([Buffer.from(`${folder}/`, "utf8"), name]));
    const kept = tmpPaths("/tmp/zoë/tmp/p-1", ["/tmp/zoë/sources/dc_a"]);
    const own = Buffer.from("/tmp/zoë/sources/dc_a/component.mjs", "utf8");
    expect(kept.toReal(own)).toBe(own);
  });
});
