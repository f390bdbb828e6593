import type { ChildProcess } from "node:child_process";
import { loadDetails, ms, numberedBody, referenceLoad, trackedLoad, waitForCount } from "../lib/common.ts";
import { INGEST_CODE } from "../lib/components.ts";
import { runLoad } from "../lib/load.ts";
import { cpuMsByRole, readTree } from "../lib/proc.ts";
import { spawnBenchChild } from "../lib/processes.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { sluiceApi } from "../lib/sluice-api.ts";
import { roundAll, summarize } from "../lib/stats.ts";

const RATE = 20;
const CLIENTS_PER_PROCESS = 500;

const rows = (p99?: number, missed?: number, clients = 1000, referenceP99?: number): Row[] => [
  {
    scenario: "stream",
    figure: `emit to every one of ${clients.toLocaleString("en-US")} SSE clients, p99`,
    measured: p99,
    unit: "ms",
    target: { kind: "atMost", value: 100 },
    ...(referenceP99 === undefined ? {} : { reference: `bare request ${ms(referenceP99)}` }),
  },
  {
    scenario: "stream",
    figure: "messages missed",
    measured: missed,
    unit: "count",
    target: { kind: "equals", value: 0 },
  },
];

/** Sends `{ type }` to a client process and resolves with its answer of the same type. */
function ask<T>(child: ChildProcess, type: string, timeoutMs = 10_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off("message", listener);
      reject(new Error(`no ${type} from the SSE client process in ${timeoutMs} ms`));
    }, timeoutMs);
    const listener = (message: { type?: string }) => {
      if (message?.type !== type) return;
      clearTimeout(timer);
      child.off("message", listener);
      resolve(message as T);
    };
    child.on("message", listener);
    child.send({ type });
  });
}

interface Report {
  receipts: Record<string, number[]>;
  ended: number;
  malformed: number;
  connected: number;
}

export const stream: Scenario = {
  name: "stream",
  title: "1,000 SSE clients on one source (in child processes), 20 events/s",
  deadlineMs: 150_000,
  quickDeadlineMs: 60_000,
  emptyRows: () => rows(),
  async run(context) {
    const clients = context.pick(1000, 40);
    const durationMs = context.pick(10_000, 1_500);
    const reference = await referenceLoad(context, {
      concurrency: 10,
      ratePerSec: RATE,
      durationMs: context.pick(4_000, 1_000),
      body: numberedBody,
    });
    const server = await context.startServer();
    const api = sluiceApi(server);
    const source = await api.deploy(INGEST_CODE);
    const streamUrl = `${server.root}/sources/${source.id}/sse`;

    const processes: Awaited<ReturnType<typeof spawnBenchChild>>[] = [];
    for (let left = clients; left > 0; left -= CLIENTS_PER_PROCESS) {
      const count = Math.min(CLIENTS_PER_PROCESS, left);
      const child = await spawnBenchChild(
        "bench/lib/sse-clients.ts",
        [streamUrl, server.apiKey, String(count)],
        /connected (\d+) failed (\d+)/,
        { readyMs: 60_000, ipc: true },
      );
      context.defer(() => child.stop());
      if (Number(child.match[2]) > 0) throw new Error(`${child.match[2]} of ${count} SSE clients could not connect`);
      processes.push(child);
    }
    context.log(`${clients} clients connected`);
    // A few events first: the sandbox process starts and every stream has carried a message.
    await runLoad({
      url: source.endpoint,
      concurrency: 1,
      durationMs: 500,
      ratePerSec: 10,
      body: (i) => numberedBody(-1 - i),
    });

    const clientTrees = async () =>
      (await Promise.all(processes.map((child) => readTree(child.child.pid ?? 0)))).flat();
    const clientsBefore = await clientTrees();
    const { load, sentAt, accepted } = await context.measure(server, async () => {
      const tracked = await trackedLoad({ url: source.endpoint, concurrency: 10, ratePerSec: RATE, durationMs });
      const received = async () => {
        let total = 0;
        for (const child of processes) total += (await ask<{ received: number }>(child.child, "progress")).received;
        return total;
      };
      await waitForCount(received, tracked.accepted.length * clients, {
        intervalMs: 250,
        stallMs: 5_000,
        timeoutMs: 30_000,
      });
      return tracked;
    });

    const clientCpuMs = Object.values(cpuMsByRole(clientsBefore, await clientTrees())).reduce(
      (sum, value) => sum + value,
      0,
    );
    const reports: Report[] = [];
    for (const child of processes) reports.push(await ask<Report>(child.child, "report", 30_000));
    const toEvery: number[] = [];
    const each: number[] = [];
    let missed = 0;
    for (const n of accepted) {
      const times = reports.flatMap((report) => report.receipts[n] ?? []);
      const sent = sentAt.get(n) as number;
      missed += Math.max(0, clients - times.length);
      for (const at of times) each.push(at - sent);
      if (times.length >= clients) toEvery.push(Math.max(...times) - sent);
    }
    const every = summarize(toEvery);
    const single = summarize(each);
    context.log(`to every client p99 ${ms(every.p99)}, per message p99 ${ms(single.p99)}, missed ${missed}`);
    context.note(
      `${accepted.length} events at ${RATE}/s to ${clients} clients in ${processes.length} child process(es). Latency runs from sending the POST to the source's endpoint until a client's socket delivered the message; "to every client" is the last client's, per event. p50 to every client ${ms(every.p50)}; per single message p50 ${ms(single.p50)}, p99 ${ms(single.p99)}. The client processes used ${(clientCpuMs / 1000).toFixed(1)} s of CPU meanwhile, on the same 2 cores as the server.`,
    );
    return {
      rows: rows(every.p99, missed, clients, reference.latency.p99),
      details: {
        clients,
        durationMs,
        events: accepted.length,
        toEveryClientMs: roundAll(every),
        perMessageMs: roundAll(single),
        missed,
        clientCpuMs: Math.round(clientCpuMs),
        streamsEnded: reports.reduce((sum, report) => sum + report.ended, 0),
        load: loadDetails(load),
        reference: loadDetails(reference),
      },
    };
  },
};
