import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { monoMs } from "../lib/clock.ts";
import {
  loadDetails,
  ms,
  numberedBody,
  referenceLoad,
  trackedLoad,
  WARMUP_REQUESTS,
  waitForCount,
  warmUp,
} from "../lib/common.ts";
import { INGEST_CODE } from "../lib/components.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { sluiceApi } from "../lib/sluice-api.ts";
import { roundAll, summarize } from "../lib/stats.ts";

const RATE = 500;

const rows = (p50?: number, p99?: number, lost?: number, ref?: { p50: number; p99: number }): Row[] => [
  {
    scenario: "webhook",
    figure: "emit to receipt p50 (500/s)",
    measured: p50,
    unit: "ms",
    ...(ref ? { reference: `bare request ${ms(ref.p50)}` } : {}),
  },
  {
    scenario: "webhook",
    figure: "emit to receipt p99 (500/s)",
    measured: p99,
    unit: "ms",
    target: { kind: "atMost", value: 25 },
    ...(ref ? { reference: `bare request ${ms(ref.p99)}` } : {}),
  },
  { scenario: "webhook", figure: "events lost", measured: lost, unit: "count", target: { kind: "equals", value: 0 } },
];

/** A webhook receiver on 127.0.0.1 in the bench process: records when each event `n` first arrived. */
async function startReceiver() {
  const firstAt = new Map<number, number>();
  let deliveries = 0;
  let duplicates = 0;
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const at = monoMs();
      deliveries++;
      try {
        const n = Number(JSON.parse(Buffer.concat(chunks).toString("utf8")).event?.n);
        if (firstAt.has(n)) duplicates++;
        else firstAt.set(n, at);
      } catch {}
      response.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    firstAt,
    stats: () => ({ deliveries, duplicates }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const webhook: Scenario = {
  name: "webhook",
  title: "emit to webhook: a receiver on 127.0.0.1, 500 events/s",
  deadlineMs: 150_000,
  quickDeadlineMs: 50_000,
  emptyRows: () => rows(),
  async run(context) {
    const durationMs = context.pick(10_000, 1_500);
    const reference = await referenceLoad(context, {
      concurrency: 50,
      ratePerSec: RATE,
      durationMs: context.pick(5_000, 1_000),
      body: numberedBody,
    });
    const receiver = await startReceiver();
    context.defer(() => receiver.close());
    const server = await context.startServer();
    const api = sluiceApi(server);
    const source = await api.deploy(INGEST_CODE);
    const webhookId = await api.createWebhook(receiver.url);
    await api.subscribe(source.id, webhookId);
    await warmUp(source.endpoint);
    await waitForCount(async () => receiver.firstAt.size, WARMUP_REQUESTS, { timeoutMs: 30_000 });

    const { load, sentAt, accepted, delivered } = await context.measure(server, async () => {
      const tracked = await trackedLoad({ url: source.endpoint, concurrency: 50, ratePerSec: RATE, durationMs });
      const arrived = () => tracked.accepted.filter((n) => receiver.firstAt.has(n)).length;
      const delivered = await waitForCount(async () => arrived(), tracked.accepted.length, { timeoutMs: 60_000 });
      return { ...tracked, delivered };
    });
    const latencies = accepted
      .filter((n) => receiver.firstAt.has(n))
      .map((n) => (receiver.firstAt.get(n) as number) - (sentAt.get(n) as number));
    const latency = summarize(latencies);
    const lost = accepted.length - delivered.count;
    context.log(`delivered ${delivered.count}/${accepted.length}, p50 ${ms(latency.p50)}, p99 ${ms(latency.p99)}`);
    context.note(
      `Latency runs from sending the POST to the source's endpoint until the receiver has the delivery's whole body (queueing of the run, the run, storing, routing and the delivery). ${accepted.length} events in ${durationMs / 1000} s; late slots of the load generator: ${load.lateSlots}.`,
    );
    return {
      rows: rows(latency.p50, latency.p99, lost, reference.latency),
      details: {
        durationMs,
        load: loadDetails(load),
        reference: loadDetails(reference),
        latencyMs: roundAll(latency),
        receiver: receiver.stats(),
        complete: delivered.complete,
      },
    };
  },
};
