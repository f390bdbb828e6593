import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { trackedLoad } from "../../../bench/lib/common.ts";
import { runLoad } from "../../../bench/lib/load.ts";

describe("runLoad against a local server", () => {
  let server: Server;
  let url: string;
  let inFlight = 0;
  let maxInFlight = 0;
  const bodies: string[] = [];
  const paths: string[] = [];
  beforeAll(async () => {
    server = createServer((request, response) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        bodies.push(Buffer.concat(chunks).toString());
        paths.push(request.url ?? "");
        // A little delay, so requests overlap.
        setTimeout(() => {
          inFlight--;
          response.writeHead(request.url === "/fail" ? 503 : 200).end("ok");
        }, 2);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/in`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("keeps exactly `concurrency` requests in flight and counts every answer", async () => {
    maxInFlight = 0;
    bodies.length = 0;
    const answered: number[] = [];
    const result = await runLoad({
      url,
      concurrency: 4,
      durationMs: 300,
      body: (index) => JSON.stringify({ index }),
      onAnswer: (index, status) => status === 200 && answered.push(index),
    });
    expect(maxInFlight).toBe(4);
    expect(result.mode).toBe("concurrency");
    expect(result.ok).toBe(result.sent);
    expect(result.statuses).toEqual({ 200: result.sent });
    expect(result.latency.count).toBe(result.sent);
    expect(answered.sort((a, b) => a - b)).toEqual(Array.from({ length: result.sent }, (_, index) => index));
    expect(bodies.map((body) => JSON.parse(body).index).sort((a, b) => a - b)).toEqual(answered);
  });

  it("starts exactly rate × duration requests in open loop, on the paths given", async () => {
    paths.length = 0;
    const result = await runLoad({
      url,
      concurrency: 10,
      ratePerSec: 100,
      durationMs: 300,
      path: (index) => (index % 2 ? "/odd" : "/even"),
    });
    expect(result.mode).toBe("rate");
    expect(result.sent).toBe(30);
    expect(result.ok).toBe(30);
    expect(paths.filter((path) => path === "/odd")).toHaveLength(15);
  });

  it("counts non-2xx answers apart from successes, and network errors as errors", async () => {
    const failing = await runLoad({ url: url.replace("/in", "/fail"), concurrency: 2, durationMs: 100 });
    expect(failing.ok).toBe(0);
    expect(failing.statuses["503"]).toBe(failing.sent);
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const refused = await runLoad({
      url: `http://127.0.0.1:${port}/`,
      concurrency: 1,
      ratePerSec: 20,
      durationMs: 100,
    });
    expect(refused.ok).toBe(0);
    expect(refused.statuses.error).toBe(refused.sent);
    expect(refused.errors[0]).toMatch(/ECONNREFUSED/);
  });

  it("stops starting requests once its stop signal is aborted, in either mode", async () => {
    for (const ratePerSec of [undefined, 200]) {
      const stop = new AbortController();
      setTimeout(() => stop.abort(), 150);
      const result = await runLoad({
        url,
        concurrency: 2,
        durationMs: 10_000,
        ...(ratePerSec === undefined ? {} : { ratePerSec }),
        stop: stop.signal,
      });
      expect(result.sent).toBeGreaterThan(0);
      expect(result.ok).toBe(result.sent);
      // Over before the 10 s it was given; the rate run did not start all rate × duration slots.
      expect(result.elapsedMs).toBeLessThan(10_000);
      if (ratePerSec !== undefined) expect(result.sent).toBeLessThan(2_000);
    }
  });

  it("trackedLoad numbers its requests from firstN, so two loads on one receiver do not share numbers", async () => {
    bodies.length = 0;
    const options = { url, concurrency: 2, ratePerSec: 200, durationMs: 30 };
    const first = await trackedLoad(options);
    const second = await trackedLoad({ ...options, firstN: -1_000 });
    const sorted = (values: Iterable<number>) => [...values].sort((a, b) => a - b);
    const from = (start: number, count: number) => Array.from({ length: count }, (_, index) => start + index);
    expect(first.accepted.length).toBeGreaterThan(0);
    expect(second.accepted.length).toBeGreaterThan(0);
    expect(sorted(first.accepted)).toEqual(from(0, first.accepted.length));
    expect(sorted(second.accepted)).toEqual(from(-1_000, second.accepted.length));
    expect(sorted(second.sentAt.keys())).toEqual(sorted(second.accepted));
    const sent = sorted(bodies.map((body) => Number(JSON.parse(body).n)));
    expect(sent).toEqual(sorted([...first.accepted, ...second.accepted]));
  });
});
