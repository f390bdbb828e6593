import {
  cpuPerEvent,
  describeCpu,
  loadDetails,
  ms,
  numberedBody,
  perSec,
  referenceLoad,
  serverCpuRow,
  trackedLoad,
  WARMUP_REQUESTS,
  waitForCount,
  warmUp,
} from "../lib/common.ts";
import { INGEST_CODE, WORKFLOW_RESPOND_STEPS, WORKFLOW_STEPS, workflowBody } from "../lib/components.ts";
import { measureIngest } from "../lib/ingest-rate.ts";
import { runLoad } from "../lib/load.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { sluiceApi } from "../lib/sluice-api.ts";
import { roundAll, summarize } from "../lib/stats.ts";

const CONCURRENCY = 50;

interface Figures {
  rate?: number;
  share?: number;
  lost?: number;
  reference?: string;
  respond?: { p50: number; p99: number };
  serverMicros?: number;
  bareRate?: number;
}

const rows = (figures: Figures = {}): Row[] => [
  {
    scenario: "workflow",
    figure: "runs/s of 3 code steps, completed and recorded (HTTP trigger, c=50)",
    measured: figures.rate,
    unit: "/s",
    target: { kind: "atLeast", value: 3000 },
    reference: "n8n claims 220 executions/s on 2 vCPU",
  },
  {
    scenario: "workflow",
    figure: "share of the bare server's rate",
    measured: figures.share,
    unit: "%",
    target: { kind: "atLeast", value: 20 },
    ...(figures.reference ? { reference: figures.reference } : {}),
  },
  serverCpuRow("workflow", "server CPU per run (c=50)", figures.serverMicros, 20, figures.bareRate),
  {
    scenario: "workflow",
    figure: "accepted triggers without an ended run",
    measured: figures.lost,
    unit: "count",
    target: { kind: "equals", value: 0 },
  },
  {
    scenario: "workflow",
    figure: "$.respond in step 2 of 3, round trip p99 (c=1)",
    measured: figures.respond?.p99,
    unit: "ms",
    target: { kind: "atMost", value: 15 },
    ...(figures.respond ? { reference: `p50 ${ms(figures.respond.p50)}` } : {}),
  },
];

export const workflows: Scenario = {
  name: "workflow",
  title:
    "an HTTP-triggered workflow of three code steps without custom response, concurrency 50, counted by its run records; then $.respond in step 2 at concurrency 1",
  deadlineMs: 240_000,
  quickDeadlineMs: 60_000,
  emptyRows: () => rows(),
  async run(context) {
    const reference = await referenceLoad(context, {
      concurrency: CONCURRENCY,
      durationMs: context.pick(5_000, 1_000),
      body: numberedBody,
    });
    const server = await context.startServer();
    const api = sluiceApi(server);

    const workflow = await api.createWorkflow(workflowBody(WORKFLOW_STEPS, false));
    const count = () => api.endedRunCount(workflow.id);
    const options = { concurrency: CONCURRENCY, count };
    const warm = await measureIngest(context, server, api, [workflow], {
      ...options,
      durationMs: context.pick(2_000, 300),
      warmUp: true,
    });
    if (!warm.complete) throw new Error(`the warm-up's runs did not all end: ${warm.stored} of ${warm.load.ok}`);
    const result = await measureIngest(context, server, api, [workflow], {
      ...options,
      durationMs: context.pick(10_000, 1_500),
    });
    const share = (100 * result.rate) / reference.okPerSec;
    // CPU per run moves far less with the machine's load than the rate does: the figure to compare.
    const perRunCpu = cpuPerEvent(context.cpuMs(), {}, result.stored);
    const perRun = describeCpu(perRunCpu);
    context.log(
      `${perSec(result.rate)} runs ended (${share.toFixed(0)}% of bare ${perSec(reference.okPerSec)}); CPU per run: ${perRun}`,
    );
    context.note(
      `Runs/s is runs ended ÷ time from the first request until the last accepted one's run was recorded; HTTP accept rate ${perSec(result.load.okPerSec)}, latency p99 ${ms(result.load.latency.p99)}. CPU per run at c=50: ${perRun}.`,
    );

    const responder = await api.createWorkflow(workflowBody(WORKFLOW_RESPOND_STEPS, true));
    await warmUp(responder.endpoint);
    const load = await context.measure(server, () =>
      runLoad({ url: responder.endpoint, concurrency: 1, durationMs: context.pick(6_000, 1_000), body: numberedBody }),
    );
    if (load.ok !== load.sent)
      throw new Error(`only ${load.ok} of ${load.sent} answers were 2xx: ${JSON.stringify(load.statuses)}`);
    context.note(`$.respond: ${load.ok} requests one at a time after ${WARMUP_REQUESTS} warm-up requests.`);
    return {
      rows: rows({
        rate: result.rate,
        share,
        lost: result.lost,
        reference: `bare ${perSec(reference.okPerSec)}`,
        respond: load.latency,
        serverMicros: perRunCpu.server,
        bareRate: reference.okPerSec,
      }),
      details: { ingest: loadDetails(result.load), respond: loadDetails(load), reference: loadDetails(reference) },
    };
  },
};

const CHAIN_RATE = 200;

const chainRows = (p50?: number, p99?: number, lost?: number): Row[] => [
  {
    scenario: "workflow-chain",
    figure: "source emit to the workflow's run p50 (200/s)",
    measured: p50,
    unit: "ms",
  },
  {
    scenario: "workflow-chain",
    figure: "source emit to the workflow's run p99 (200/s)",
    measured: p99,
    unit: "ms",
    target: { kind: "atMost", value: 25 },
  },
  {
    scenario: "workflow-chain",
    figure: "emitted events without a run",
    measured: lost,
    unit: "count",
    target: { kind: "equals", value: 0 },
  },
];

interface EventItem {
  indexed_at_ms: number;
  event: { n?: number };
}
interface RunItem {
  started_at_ms: number;
  event_preview: { n?: number };
}

export const workflowChain: Scenario = {
  name: "workflow-chain",
  title: "a source emitting 200 events/s into a workflow (a source trigger): from the stored emit to the run's start",
  deadlineMs: 150_000,
  quickDeadlineMs: 50_000,
  emptyRows: () => chainRows(),
  async run(context) {
    const durationMs = context.pick(10_000, 1_500);
    const server = await context.startServer();
    const api = sluiceApi(server);
    const source = await api.deploy(INGEST_CODE);
    const workflow = await api.createWorkflow({
      ...workflowBody(WORKFLOW_STEPS, false),
      triggers: [{ type: "source", props: { source_id: source.id } }],
    });
    const ended = () => api.endedRunCount(workflow.id);
    await warmUp(source.endpoint);
    await waitForCount(ended, WARMUP_REQUESTS, { timeoutMs: 30_000 });

    const before = await ended();
    const load = await context.measure(server, async () => {
      const tracked = await trackedLoad({ url: source.endpoint, concurrency: 50, ratePerSec: CHAIN_RATE, durationMs });
      await waitForCount(async () => (await ended()) - before, tracked.accepted.length, { timeoutMs: 60_000 });
      return tracked;
    });
    // Server timestamps on both sides: when the emit was stored, and when its run began.
    const emittedAt = new Map<number, number>();
    for (const item of await api.allItems<EventItem>(`/sources/${source.id}/event_summaries?expand=event`)) {
      if (typeof item.event?.n === "number" && item.event.n >= 0) emittedAt.set(item.event.n, item.indexed_at_ms);
    }
    const accepted = new Set(load.accepted);
    const latencies: number[] = [];
    for (const run of await api.allItems<RunItem>(`/workflows/${workflow.id}/runs`)) {
      const n = run.event_preview?.n;
      const at = typeof n === "number" ? emittedAt.get(n) : undefined;
      if (at !== undefined && accepted.has(n as number)) latencies.push(run.started_at_ms - at);
    }
    const latency = summarize(latencies);
    const lost = load.accepted.length - latencies.length;
    context.log(`${latencies.length}/${load.accepted.length} runs, p50 ${ms(latency.p50)}, p99 ${ms(latency.p99)}`);
    context.note(
      `From the source event's indexed_at_ms to its run's started_at_ms (both the server's clock): the outbox relay, the dispatch, the durable run queue and the run's start. ${load.accepted.length} events in ${durationMs / 1000} s.`,
    );
    return {
      rows: chainRows(latency.p50, latency.p99, lost),
      details: { durationMs, load: loadDetails(load.load), latencyMs: roundAll(latency) },
    };
  },
};
