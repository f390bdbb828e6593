import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
  open(path: string): {
    toUrl(): Promise<string>;
    toJSON(): unknown;
    toEncodedString(): Promise<string>;
    fromReadableStream(stream: Readable, type?: string, length?: number): Promise<unknown>;
    createWriteStream(type?: string): Promise<NodeJS.WritableStream>;
  };
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

  describe("against a store that is busy (503)", () => {
    let server: Server;
    let base = "";
    /** Requests seen, as `<method> <path> <body>`; the first `busy` of each path answer 503. */
    const seen: string[] = [];
    let busy = 0;
    let retryAfter: string | undefined = "0";
    const answeredBusy = new Map<string, number>();
    beforeAll(async () => {
      server = createServer(async (request: IncomingMessage, response) => {
        const chunks: Buffer[] = [];
        for await (const chunk of request) chunks.push(chunk as Buffer);
        const path = request.url ?? "/";
        seen.push(`${request.method} ${path} ${Buffer.concat(chunks).toString()}`);
        const count = answeredBusy.get(path) ?? 0;
        if (count < busy) {
          answeredBusy.set(path, count + 1);
          response.writeHead(503, retryAfter === undefined ? {} : { "retry-after": retryAfter });
          response.end('{"error":"too many File Store transfers are in flight"}');
          return;
        }
        response.end(request.method === "GET" ? "content" : "{}");
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    function filesAt(name: string): Files {
      const send: DataStoreCaller = async () => ({
        ok: true,
        value: { get_url: `${base}/get/${name}`, put_url: `${base}/put/${name}`, expires_at_ms: Date.now() + 600_000 },
      });
      return createFilesApi(send) as unknown as Files;
    }

    it("tries a read and a whole-content write again after Retry-After, up to five tries in all", async () => {
      busy = 2;
      expect(await filesAt("a").open("a.txt").toEncodedString()).toBe("content");
      const writer = await filesAt("b").open("b.txt").createWriteStream("text/plain");
      await new Promise((resolve, reject) => writer.end("hello", () => resolve(undefined)).once("error", reject));
      expect(seen.splice(0)).toEqual([
        "GET /get/a ",
        "GET /get/a ",
        "GET /get/a ",
        "PUT /put/b hello",
        "PUT /put/b hello",
        "PUT /put/b hello",
      ]);
      busy = 10;
      await expect(filesAt("c").open("c.txt").toEncodedString()).rejects.toThrow(
        /reading "c.txt" failed with HTTP 503/,
      );
      expect(seen.splice(0)).toHaveLength(5);
    });

    it("waits 0.2 s when no Retry-After is given, and never sends a stream twice", async () => {
      busy = 1;
      retryAfter = undefined;
      const started = Date.now();
      expect(await filesAt("d").open("d.txt").toEncodedString()).toBe("content");
      expect(Date.now() - started).toBeGreaterThanOrEqual(190);
      const streamed = filesAt("e")
        .open("e.txt")
        .fromReadableStream(Readable.from([Buffer.from("abc")]), "text/plain", 3);
      await expect(streamed).rejects.toThrow(/writing "e.txt" failed with HTTP 503: .*too many File Store transfers/);
      expect(seen.splice(0)).toEqual(["GET /get/d ", "GET /get/d ", "PUT /put/e abc"]);
    });
  });
});
