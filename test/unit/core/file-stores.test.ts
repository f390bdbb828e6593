import { describe, expect, it } from "vitest";
import { dataStoreService, grantDataStores, runServices, serveGrantedCall } from "#core/data-stores";
import { DomainError } from "#core/errors";
import { mayUseFiles, parseFileStoreCall } from "#core/file-stores";
import type { FileStore } from "#core/ports/file-store";
import { memoryDeps } from "../../support/memory-deps.ts";
import { recordingLogger } from "../../support/recording-logger.ts";

const START = Date.UTC(2026, 10, 28, 4);

/** A File Store that records what it is asked, answering each as the port says. */
function recordingFiles(fail?: Error) {
  const asked: unknown[][] = [];
  const files: FileStore = {
    async urls(...args) {
      asked.push(["urls", ...args]);
      if (fail) throw fail;
      return { getUrl: `get:${args[0]}/${args[1]}`, putUrl: `put:${args[0]}/${args[1]}` };
    },
    async list(...args) {
      asked.push(["list", ...args]);
      return { entries: [{ path: "a", name: "a", type: "file", size: 1, modifiedAtMs: 5 }], next: "a" };
    },
    async remove(...args) {
      asked.push(["remove", ...args]);
    },
  };
  return { files, asked };
}

describe("$.files calls on the trusted side", () => {
  it("checks each call as hostile input", () => {
    expect(parseFileStoreCall({ op: "files.sign", path: "/a/b.txt" })).toEqual({ op: "files.sign", path: "a/b.txt" });
    expect(parseFileStoreCall({ op: "files.dir", path: "a/", after: "x" })).toEqual({
      op: "files.dir",
      path: "a",
      after: "x",
    });
    expect(parseFileStoreCall({ op: "files.dir", path: "" })).toEqual({ op: "files.dir", path: "" });
    expect(parseFileStoreCall({ op: "files.sign", path: "" })).toBe('the File Store path "" names no file');
    expect(parseFileStoreCall({ op: "files.delete", path: "a/./b" })).toMatch(/has an empty, "\." or "\.\." part/);
    expect(parseFileStoreCall({ op: "files.sign", path: "a\u0000b" })).toMatch(/control character/);
    expect(parseFileStoreCall({ op: "files.sign", path: "x".repeat(901) })).toBe(
      "a File Store path may be at most 900 bytes",
    );
    expect(parseFileStoreCall({ op: "files.sign", path: `${"x".repeat(256)}/a` })).toBe(
      "each part of a File Store path may be at most 255 bytes",
    );
    // Each part but the last is a folder (an inode on a local disk): at most 32 parts.
    expect(parseFileStoreCall({ op: "files.sign", path: `${"d/".repeat(31)}f` })).toEqual({
      op: "files.sign",
      path: `${"d/".repeat(31)}f`,
    });
    expect(parseFileStoreCall({ op: "files.sign", path: `${"d/".repeat(32)}f` })).toBe(
      "a File Store path may have at most 32 parts",
    );
    expect(parseFileStoreCall({ op: "files.dir", path: "", after: 3 })).toBe(
      "a File Store page must be named by its text",
    );
    expect(parseFileStoreCall({ op: "files.chmod", path: "a" })).toBe("a File Store call must name a known method");
    expect(parseFileStoreCall(["files.sign"])).toBe("a File Store call must be an object");
  });

  it("serves the run's own project whatever the call names, with URLs good for 30 minutes", async () => {
    const { files, asked } = recordingFiles();
    const deps = { ...memoryDeps(START), files };
    const serve = dataStoreService(deps, new Set(), "proj_mine");
    expect(await serve({ op: "files.sign", path: "a.txt", project: "proj_other", store: "proj_other" })).toEqual({
      ok: true,
      value: { get_url: "get:proj_mine/a.txt", put_url: "put:proj_mine/a.txt", expires_at_ms: START + 30 * 60_000 },
    });
    expect(await serve({ op: "files.dir", path: "" })).toEqual({
      ok: true,
      value: { entries: [{ path: "a", name: "a", type: "file", size: 1, modifiedAtMs: 5 }], next: "a" },
    });
    expect(await serve({ op: "files.delete", path: "a.txt" })).toEqual({ ok: true });
    expect(asked).toEqual([
      ["urls", "proj_mine", "a.txt", START + 30 * 60_000],
      ["list", "proj_mine", "", undefined, 1000],
      ["remove", "proj_mine", "a.txt"],
    ]);
  });

  it("refuses every call of a run with no project, and says a store's conflict but not its fault", async () => {
    const { files, asked } = recordingFiles();
    const none = dataStoreService({ ...memoryDeps(START), files }, new Set());
    expect(await none({ op: "files.sign", path: "a" })).toEqual({
      ok: false,
      error: {
        name: "FileStoreError",
        message: "$.files: this run has no File Store (workflow steps and actions run in a project have one)",
      },
    });
    expect(asked).toEqual([]);

    const conflicted = recordingFiles(new DomainError("conflict", 'the File Store has a folder at "a"'));
    const serve = dataStoreService({ ...memoryDeps(START), files: conflicted.files }, new Set(), "proj_a");
    expect(await serve({ op: "files.sign", path: "a" })).toEqual({
      ok: false,
      error: { name: "FileStoreError", message: 'the File Store has a folder at "a"' },
    });
    const errors: Record<string, unknown>[] = [];
    const log = recordingLogger(errors);
    const broken = recordingFiles(new Error("EIO: disk on fire /srv/secret/path"));
    const failing = dataStoreService({ ...memoryDeps(START), files: broken.files, log }, new Set(), "proj_a");
    expect(await failing({ op: "files.sign", path: "a" })).toEqual({
      ok: false,
      error: { name: "FileStoreError", message: "the File Store could not be reached; try again" },
    });
    expect(errors).toEqual([
      expect.objectContaining({ message: "file store call failed", project_id: "proj_a", op: "files.sign" }),
    ]);
  });

  it("carries the project in a run's grant (AWS), and a grant without one reaches no File Store", async () => {
    const { files, asked } = recordingFiles();
    const deps = { ...memoryDeps(START), files };
    const withProject = await grantDataStores(deps, "inv_1", new Set(), 30_000, "proj_a");
    expect(await serveGrantedCall(deps, withProject.grant, { op: "files.delete", path: "x" })).toEqual({ ok: true });
    expect(asked).toEqual([["remove", "proj_a", "x"]]);
    const without = await grantDataStores(deps, "inv_2", new Set(), 30_000);
    expect(await serveGrantedCall(deps, without.grant, { op: "files.delete", path: "x" })).toMatchObject({
      ok: false,
      error: { name: "FileStoreError" },
    });
  });

  it("serves a run's stores and project, and seals a grant only for a run that can use one", async () => {
    const { files, asked } = recordingFiles();
    const deps = { ...memoryDeps(START), files };
    const run = { invocationId: "inv_s", timeoutMs: 30_000 };
    expect(runServices(deps, run, new Set())).toBeUndefined();
    const quiet = runServices(deps, run, new Set(), {
      projectId: "proj_a",
      components: [{ codeHash: "q1", code: "return 1" }],
    });
    expect(await quiet?.dataStoreGrant?.()).toBeUndefined();
    // Locally the service serves the project whatever the code says: only a grant depends on it.
    expect(await quiet?.dataStore?.({ op: "files.delete", path: "x" })).toEqual({ ok: true });
    expect(asked).toEqual([["remove", "proj_a", "x"]]);
    const filing = runServices(deps, run, new Set(), {
      projectId: "proj_a",
      components: [{ codeHash: "q2", code: "$.files.open('x')" }],
    });
    const grant = await filing?.dataStoreGrant?.();
    expect(await serveGrantedCall(deps, grant!.grant, { op: "files.delete", path: "y" })).toEqual({ ok: true });
    expect(asked.at(-1)).toEqual(["remove", "proj_a", "y"]);
    // A bound store always gets one, with no project for files.
    const storeOnly = await runServices(deps, run, new Set(["ds_1"]))?.dataStoreGrant?.();
    expect(await serveGrantedCall(deps, storeOnly!.grant, { op: "files.delete", path: "z" })).toMatchObject({
      ok: false,
      error: { name: "FileStoreError" },
    });
  });

  it("says which code may use $.files: code naming `files`, remembered by its hash", () => {
    expect(mayUseFiles([{ codeHash: "h1", code: "export default { run({ $ }) { return $.files.open('a') } }" }])).toBe(
      true,
    );
    expect(mayUseFiles([{ codeHash: "h2", code: "const { files } = $;" }])).toBe(true);
    expect(mayUseFiles([{ codeHash: "h3", code: "return profiles.length" }])).toBe(false);
    expect(mayUseFiles([])).toBe(false);
  });
});
