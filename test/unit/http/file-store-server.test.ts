import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { request as httpRequest, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DiskFileStore } from "#adapters/local/disk-file-store";
import { InProcessEventBus } from "#adapters/local/in-process-event-bus";
import { LocalSecrets } from "#adapters/local/local-secrets";
import { silentLogger } from "#core/ports/logger";
import { routes } from "#http/routes";
import { FileTransferSlots } from "#local-mode/file-transfer-slots";
import { createLocalServer } from "#local-mode/server";
import { memoryDeps } from "../../support/memory-deps.ts";

/**
 * Local mode's file URLs (`/files/<token>/<name>`) served in this process, so that what the server
 * holds open can be counted: a download its client abandons must not leave its file open.
 */
let server: Server;
let store: DiskFileStore;
let base: string;
const dataDir = mkdtempSync(join(tmpdir(), "sluice-file-server-"));

/** A server of `store`'s URLs on a free port of 127.0.0.1, and its base URL. */
async function serve(
  store: DiskFileStore,
  fileTransfers?: FileTransferSlots,
): Promise<{ server: Server; base: string }> {
  const deps = memoryDeps(Date.now());
  const options = fileTransfers === undefined ? {} : { fileTransfers };
  const { server } = createLocalServer(
    routes,
    { ...deps, files: store },
    { bus: new InProcessEventBus(silentLogger), files: store, ...options },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function stop(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

beforeAll(async () => {
  store = new DiskFileStore({
    dataDir,
    secrets: await LocalSecrets.fromDataDir(dataDir, undefined),
    publicUrl: () => base,
    now: () => Date.now(),
    maxProjectBytes: 64 * 1024 * 1024,
  });
  ({ server, base } = await serve(store));
});

afterAll(async () => {
  await stop(server);
  rmSync(dataDir, { recursive: true, force: true });
});

const openFiles = () => readdirSync("/proc/self/fd").length;

it("closes a file whose download the client abandons after its first bytes", async () => {
  await store.write("proj_a", "big.bin", Readable.from([Buffer.alloc(8 * 1024 * 1024)]), undefined);
  const { getUrl } = await store.urls("proj_a", "big.bin", Date.now() + 60_000);
  const whole = await fetch(getUrl);
  expect([whole.status, (await whole.arrayBuffer()).byteLength]).toEqual([200, 8 * 1024 * 1024]);
  const before = openFiles();
  for (let i = 0; i < 20; i += 1) {
    await new Promise<void>((resolve) => {
      const request = httpRequest(getUrl, (response) => {
        response.once("data", () => {
          request.destroy();
          resolve();
        });
      });
      request.end();
    });
  }
  await expect.poll(openFiles, { timeout: 5_000 }).toBeLessThanOrEqual(before + 2);
});

it("serves a file with a type by its extension, never one a browser would run as a page here", async () => {
  for (const [path, type] of [
    ["logo.PNG", "image/png"],
    ["report.csv", "text/csv; charset=utf-8"],
    ["page.html", "text/plain; charset=utf-8"],
    ["drawing.svg", "application/octet-stream"],
    ["noext", "application/octet-stream"],
  ] as const) {
    await store.write("proj_a", path, Readable.from([Buffer.from("x")]), 1);
    const answer = await fetch((await store.urls("proj_a", path, Date.now() + 60_000)).getUrl);
    expect(answer.headers.get("content-type"), path).toBe(type);
    expect(answer.headers.get("content-security-policy")).toBe("sandbox");
    expect(answer.headers.get("x-content-type-options")).toBe("nosniff");
    await answer.arrayBuffer();
  }
  // HEAD answers the headers of a GET, with no body.
  const head = await fetch((await store.urls("proj_a", "report.csv", Date.now() + 60_000)).getUrl, { method: "HEAD" });
  expect([head.status, head.headers.get("content-length"), await head.text()]).toEqual([200, "1", ""]);
});

describe("with a cap of 2 transfers in flight (1 per project)", () => {
  let capped: { server: Server; base: string };
  // Idle transfers are cut after 0.3-0.6 s here; the held uploads below move a byte every 0.1 s.
  const slots = new FileTransferSlots(2, 300);
  beforeAll(async () => {
    capped = await serve(store, slots);
  });
  afterAll(() => stop(capped.server));

  /** The URL to write `path` of `project` through the capped server. */
  const putUrl = async (project: string, path: string) =>
    (await store.urls(project, path, Date.now() + 60_000)).putUrl.replace(base, capped.base);

  /**
   * An upload of 1,000 bytes that sends 4, then one more every 0.1 s (slow, never idle):
   * `finish()` sends the rest, `cut()` drops the connection.
   */
  async function heldUpload(url: string) {
    const request = httpRequest(url, { method: "PUT", headers: { "content-length": "1000" } });
    const answered = new Promise<number>((resolve, reject) => {
      request.once("response", (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      });
      request.once("error", reject);
    });
    const before = slots.inFlight;
    let sent = 4;
    request.write("1234");
    await expect.poll(() => slots.inFlight, { timeout: 5_000 }).toBe(before + 1);
    const trickle = setInterval(() => {
      sent += 1;
      request.write("x");
    }, 100);
    return {
      finish: () => {
        clearInterval(trickle);
        request.end("y".repeat(1000 - sent));
        return answered;
      },
      cut: () => {
        clearInterval(trickle);
        answered.catch(() => {});
        request.destroy();
      },
    };
  }

  /** What proj_a's kept.txt holds, read through the uncapped server. */
  const kept = async () => (await fetch((await store.urls("proj_a", "kept.txt", Date.now() + 60_000)).getUrl)).text();

  it("answers 503 with Retry-After past a project's share and past the cap, reads no body, and frees a slot when an upload ends or is cut", async () => {
    await store.write("proj_a", "kept.txt", Readable.from([Buffer.from("old")]), 3);
    const first = await heldUpload(await putUrl("proj_a", "slow.txt"));

    // Project a holds its one slot: its next transfer, a read or a write, is refused, and loses nothing.
    const refused = await fetch(await putUrl("proj_a", "kept.txt"), { method: "PUT", body: "new" });
    expect([refused.status, refused.headers.get("retry-after")]).toEqual([503, "1"]);
    expect(((await refused.json()) as { error: string }).error).toMatch(/too many File Store transfers/);
    const read = await fetch(
      (await store.urls("proj_a", "kept.txt", Date.now() + 60_000)).getUrl.replace(base, capped.base),
    );
    expect(read.status).toBe(503);
    await read.arrayBuffer();
    expect(await kept()).toBe("old");

    // Another project has its own share; with both taken, a third is refused too.
    const second = await heldUpload(await putUrl("proj_b", "slow.txt"));
    const third = await fetch(await putUrl("proj_c", "x.txt"), { method: "PUT", body: "x" });
    expect(third.status).toBe(503);
    await third.arrayBuffer();

    // An upload that ends gives its slot back; so does one its client cuts.
    expect(await first.finish()).toBe(200);
    second.cut();
    await expect.poll(() => slots.inFlight, { timeout: 5_000 }).toBe(0);
    const again = await fetch(await putUrl("proj_a", "kept.txt"), { method: "PUT", body: "new" });
    expect(again.status).toBe(200);
    await again.arrayBuffer();
    expect(await kept()).toBe("new");
    const other = await fetch(await putUrl("proj_b", "y.txt"), { method: "PUT", body: "y" });
    expect(other.status).toBe(200);
    await other.arrayBuffer();
  });

  it("cuts a transfer whose client stops sending or reading, and so gives its slot back", async () => {
    // An upload that stops after 4 of its 8 bytes: cut, nothing placed.
    const stalled = httpRequest(await putUrl("proj_a", "stalled.txt"), {
      method: "PUT",
      headers: { "content-length": "8" },
    });
    const cut = new Promise<string>((resolve) =>
      stalled.once("error", (error) => resolve((error as NodeJS.ErrnoException).code ?? "")),
    );
    stalled.write("1234");
    await expect.poll(() => slots.inFlight, { timeout: 5_000 }).toBe(1);
    expect(await cut).toBe("ECONNRESET");
    await expect.poll(() => slots.inFlight, { timeout: 5_000 }).toBe(0);
    expect(await store.read("proj_a", "stalled.txt")).toBeUndefined();

    // A download whose client reads its first bytes and then nothing: cut once the buffers are full.
    await store.write("proj_a", "large.bin", Readable.from([Buffer.alloc(32 * 1024 * 1024)]), undefined);
    const getUrl = (await store.urls("proj_a", "large.bin", Date.now() + 60_000)).getUrl.replace(base, capped.base);
    const response = await new Promise<IncomingMessage>((resolve) => httpRequest(getUrl, resolve).end());
    await expect.poll(() => slots.inFlight, { timeout: 5_000 }).toBe(1);
    // Nothing is read: the buffers fill, the server is cut off, its slot is free again.
    await expect.poll(() => slots.inFlight, { timeout: 5_000 }).toBe(0);
    let received = 0;
    response.on("data", (chunk: Buffer) => {
      received += chunk.length;
    });
    await new Promise((resolve) => response.socket.once("close", resolve));
    expect(response.complete).toBe(false);
    expect(received).toBeLessThan(32 * 1024 * 1024);
    await expect.poll(() => slots.inFlight, { timeout: 5_000 }).toBe(0);
  });
});
