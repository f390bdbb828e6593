import {
  cpuPerEvent,
  describeCpu,
  loadDetails,
  numberedBody,
  perSec,
  referenceLoad,
  serverCpuRow,
  WARMUP_REQUESTS,
  waitForCount,
  warmUp,
} from "../lib/common.ts";
import { INGEST_CODE, INGEST_DB_CODE } from "../lib/components.ts";
import { measureIngest } from "../lib/ingest-rate.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { sluiceApi } from "../lib/sluice-api.ts";
import { round } from "../lib/stats.ts";

const CONCURRENCY = 50;

const rows = (
  rate?: number,
  share?: number,
  lost?: number,
  reference?: string,
  db?: { rate: number; lost: number },
  cpu?: { serverMicros: number | undefined; bareRate: number },
): Row[] => [
  {
    scenario: "ingest",
    figure: "events/s, accepted and stored (c=50)",
    measured: rate,
    unit: "/s",
    target: { kind: "atLeast", value: 5000 },
    ...(reference ? { reference } : {}),
  },
  {
    scenario: "ingest",
    figure: "share of the bare server's rate",
    measured: share,
    unit: "%",
    target: { kind: "atLeast", value: 35 },
    ...(reference ? { reference } : {}),
  },
  serverCpuRow("ingest", "server CPU per stored event (c=50)", cpu?.serverMicros, 35, cpu?.bareRate),
  {
    scenario: "ingest",
    figure: "accepted events not stored",
    measured: lost,
    unit: "count",
    target: { kind: "equals", value: 0 },
  },
  {
    scenario: "ingest",
    figure: "events/s, a $.service.db source: one run at a time (c=50)",
    measured: db?.rate,
    unit: "/s",
    ...(rate !== undefined ? { reference: `without db ${perSec(rate)}` } : {}),
  },
  {
    scenario: "ingest",
    figure: "accepted events not stored, $.service.db source",
    measured: db?.lost,
    unit: "count",
    target: { kind: "equals", value: 0 },
  },
];

export const ingest: Scenario = {
  name: "ingest",
  title:
    "POST to an HTTP source without custom response, the run emits the body; concurrency 50; then the same with a $.service.db counter",
  deadlineMs: 270_000,
  quickDeadlineMs: 45_000,
  emptyRows: () => rows(),
  async run(context) {
    const durationMs = context.pick(10_000, 1_500);
    const reference = await referenceLoad(context, {
      concurrency: CONCURRENCY,
      durationMs: context.pick(5_000, 1_000),
      body: numberedBody,
    });
    context.log(`bare server: ${perSec(reference.okPerSec)}`);

    const server = await context.startServer();
    const api = sluiceApi(server);
    const source = await api.deploy(INGEST_CODE);
    await warmUp(source.endpoint);
    await waitForCount(() => api.eventCount(source.id), WARMUP_REQUESTS);

    const warm = await measureIngest(context, server, api, [source], {
      concurrency: CONCURRENCY,
      durationMs: context.pick(2_000, 300),
      warmUp: true,
    });
    if (!warm.complete) throw new Error(`the warm-up's events were not all stored: ${warm.stored} of ${warm.load.ok}`);
    const result = await measureIngest(context, server, api, [source], { concurrency: CONCURRENCY, durationMs });
    const { load, rate, lost } = result;
    context.log(
      `accepted ${load.ok} (${perSec(load.okPerSec)}), stored ${result.stored} in ${result.storedSeconds.toFixed(1)} s`,
    );
    context.note(
      `After a 2 s warm-up at the same concurrency (not counted). Events/s is events stored ÷ time from the first request until the last accepted event was stored (the answer comes before the run, so a backlog counts against the rate). HTTP accept rate alone: ${perSec(load.okPerSec)}, latency p50 ${load.latency.p50.toFixed(1)} ms, p99 ${load.latency.p99.toFixed(1)} ms.`,
    );
    // CPU per stored event does not depend on how busy the machine was: the most stable figure here.
    const perEvent = cpuPerEvent(context.cpuMs(), {}, result.stored);
    context.note(
      `CPU per stored event: ${describeCpu(perEvent)} (at 5,000 events/s one core gives each event 200 µs).`,
    );

    // The same load on a source that keeps a $.service.db counter: one run at a time.
    const dbSource = await api.deploy(INGEST_DB_CODE);
    await warmUp(dbSource.endpoint);
    await waitForCount(() => api.eventCount(dbSource.id), WARMUP_REQUESTS);
    await measureIngest(context, server, api, [dbSource], {
      concurrency: CONCURRENCY,
      durationMs: context.pick(2_000, 300),
      warmUp: true,
    });
    const cpuBefore = context.cpuMs();
    // Shorter: its runs cannot keep up with what the endpoint accepts, and the backlog must drain.
    const db = await measureIngest(context, server, api, [dbSource], {
      concurrency: CONCURRENCY,
      durationMs: context.pick(3_000, 500),
    });
    const dbPerEvent = cpuPerEvent(context.cpuMs(), cpuBefore, db.stored);
    context.log(`$.service.db source: accepted ${db.load.ok}, stored ${db.stored} in ${db.storedSeconds.toFixed(1)} s`);
    context.note(
      `A $.service.db source (reads and writes a counter every run), same load: its runs go one at a time. HTTP accept rate ${perSec(db.load.okPerSec)}; CPU per stored event: ${describeCpu(dbPerEvent)}.`,
    );
    return {
      rows: rows(rate, (rate / reference.okPerSec) * 100, lost, `bare ${perSec(reference.okPerSec)}`, db, {
        serverMicros: perEvent.server,
        bareRate: reference.okPerSec,
      }),
      details: {
        durationMs,
        load: loadDetails(load),
        reference: loadDetails(reference),
        stored: result.stored,
        storedSeconds: round(result.storedSeconds),
        complete: result.complete,
        cpuMicrosPerEvent: perEvent,
        db: {
          load: loadDetails(db.load),
          stored: db.stored,
          storedSeconds: round(db.storedSeconds),
          complete: db.complete,
          cpuMicrosPerEvent: dbPerEvent,
        },
      },
    };
  },
};
