import { describe, expect, it } from "vitest";
import type { DataStoreCaller } from "#runtime/data-store-client";
import { createFilesApi } from "#runtime/file-store-client";
import type { FileStoreEntry, Json, ServiceCall } from "#runtime/protocol";

/** A trusted side that answers `files.dir` in pages of two and `files.sign` with URLs expiring at `expiresAt()`. */
function pagedStore(names: string[], expiresAt: () => number) {
  const calls: ServiceCall[] = [];
  const send: DataStoreCaller = async (call) => {
    calls.push(call);
    if (call.op === "files.dir") {
      const start = call.after === undefined ? 0 : names.indexOf(call.after) + 1;
      const page = names.slice(start, start + 2);
      const entries: FileStoreEntry[] = page.map((name) => ({ path: name, name, type: "file", size: 1 }));
      const next = start + 2 < names.length ? page.at(-1) : undefined;
      return { ok: true, value: (next ? { entries, next } : { entries }) as unknown as Json };
    }
    if (call.op === "files.sign") {
      const n = calls.length;
      return { ok: true, value: { get_url: `get-${n}`, put_url: `put-${n}`, expires_at_ms: expiresAt() } };
    }
    return { ok: true };
  };
  return { send, calls };
}

type Files = {
  dir(path?: string): AsyncIterable<{ path: string; isFile(): boolean; file?: { toUrl(): Promise<string> } }>;
  open(path: string): { toUrl(): Promise<string>; toJSON(): unknown };
};

describe("$.files in the runtime", () => {
  it("walks every page of a folder, asking for each after the last", async () => {
    const { send, calls } = pagedStore(["a", "b", "c", "d", "e"], () => Date.now() + 600_000);
    const files = createFilesApi(send) as unknown as Files;
    const seen: string[] = [];
    for await (const entry of files.dir("/")) seen.push(entry.path);
    expect(seen).toEqual(["a", "b", "c", "d", "e"]);
    expect(calls).toEqual([
      { op: "files.dir", path: "" },
      { op: "files.dir", path: "", after: "b" },
      { op: "files.dir", path: "", after: "d" },
    ]);
  });

  it("asks for a file's URLs once while they have time left, again when they are about to expire", async () => {
    let expiresAt = Date.now() + 600_000;
    const { send, calls } = pagedStore([], () => expiresAt);
    const file = (createFilesApi(send) as unknown as Files).open("report.csv");
    expect(await file.toUrl()).toBe("get-1");
    expect(await file.toUrl()).toBe("get-1");
    expect(file.toJSON()).toEqual({
      type: "PipedreamProjectFile",
      path: "report.csv",
      get_url: "get-1",
      expires_at_ms: expiresAt,
    });
    expiresAt = Date.now() + 1_000;
    const soon = (createFilesApi(send) as unknown as Files).open("soon.csv");
    expect(await soon.toUrl()).toBe("get-2");
    expect(await soon.toUrl()).toBe("get-3");
    expect(calls.filter((call) => call.op === "files.sign")).toHaveLength(3);
  });
});
