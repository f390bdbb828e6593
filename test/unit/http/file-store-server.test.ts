import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DiskFileStore } from "#adapters/local/disk-file-store";
import { InProcessEventBus } from "#adapters/local/in-process-event-bus";
import { LocalSecrets } from "#adapters/local/local-secrets";
import { silentLogger } from "#core/ports/logger";
import { routes } from "#http/routes";
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

beforeAll(async () => {
  const deps = memoryDeps(Date.now());
  store = new DiskFileStore({
    dataDir,
    secrets: await LocalSecrets.fromDataDir(dataDir, undefined),
    publicUrl: () => base,
    now: () => Date.now(),
    maxProjectBytes: 64 * 1024 * 1024,
  });
  ({ server } = createLocalServer(
    routes,
    { ...deps, files: store },
    { bus: new InProcessEventBus(silentLogger), files: store },
  ));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
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
