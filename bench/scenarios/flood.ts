import { eventually } from "../../test/support/eventually.ts";
import { monoMs } from "../lib/clock.ts";
import { loadDetails, ms, numberedBody, perSec, referenceLoad, waitForCount, warmUp } from "../lib/common.ts";
import { floodHistory, type Tenant } from "../lib/flood-history.ts";
import { type LoadOptions, type LoadResult, runLoad } from "../lib/load.ts";
import { spawnBenchChild } from "../lib/processes.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { round } from "../lib/stats.ts";

/** The other tenant's requests: a page of its own source's history, at a fixed rate (open loop). */
const OTHER_RATE = 200;
const OTHER_LOAD = { method: "GET", concurrency: 20, ratePerSec: OTHER_RATE } as const;
/** Connections emitting to the flooder's endpoint, and clients paging its history. */
const EMITTERS = 16;
const HISTORY_READERS = 4;
const P99_TARGET_MS = 50;

interface Figures {
  emit: number;
  history: number;
  catchUp: number;
  deletion: number;
  catchUpFaults: number;
}

const rows = (events: number, figures?: Figures, referenceP99?: number): Row[] => {
  const count = events.toLocaleString("en-US");
  const reference = referenceP99 === undefined ? {} : { reference: `bare p99 ${ms(referenceP99)}` };
  const p99 = (figure: string, measured: number | undefined): Row => ({
    scenario: "flood",
    figure: `another tenant's request p99 while one tenant ${figure}`,
    measured,
    unit: "ms",
    target: { kind: "atMost", value: P99_TARGET_MS },
    ...reference,
  });
  return [
    p99(`emits (c=${EMITTERS})`, figures?.emit),
    p99(`pages its history with total_count (${HISTORY_READERS} clients, ${count} events)`, figures?.history),
    p99(`resumes a stream from Last-Event-ID 1-0 (${count} events)`, figures?.catchUp),
    p99(`deletes all its events (${count})`, figures?.deletion),
    {
      scenario: "flood",
      figure: "stream catch-up: events missed or repeated",
      measured: figures?.catchUpFaults,
      unit: "count",
      target: { kind: "equals", value: 0 },
    },
  ];
};

/**
 * The other tenant's load, running until `flood` settles (at most `maxMs`): its latency is what
 * one tenant's flood costs everyone else.
 */
async function otherTenantDuring<T>(
  other: Tenant,
  baseUrl: string,
  maxMs: number,
  flood: () => Promise<T>,
): Promise<{ load: LoadResult; flood: T; floodMs: number }> {
  const stop = new AbortController();
  const load = runLoad(otherLoad(other, baseUrl, maxMs, stop.signal));
  const started = monoMs();
  try {
    const result = await flood();
    const floodMs = monoMs() - started;
    stop.abort();
    return { flood: result, floodMs, load: await load };
  } finally {
    stop.abort();
    await load;
  }
}

function otherLoad(other: Tenant, baseUrl: string, durationMs: number, stop?: AbortSignal): LoadOptions {
  return {
    url: `${baseUrl}/sources/${other.source.id}/event_summaries?limit=10`,
    headers: { authorization: `Bearer ${other.apiKey}` },
    ...OTHER_LOAD,
    durationMs,
    ...(stop ? { stop } : {}),
  };
}

export const flood: Scenario = {
  name: "flood",
  title:
    "one tenant with 1,000,000 events floods (emits, history, stream catch-up, deletion); another tenant's requests",
  deadlineMs: 420_000,
  quickDeadlineMs: 120_000,
  emptyRows: () => rows(1_000_000),
  async run(context) {
    const events = context.pick(1_000_000, 20_000);
    const phaseMs = context.pick(8_000, 1_500);
    // The slow phases (catch-up, deletion) last as long as they take, up to this.
    const longPhaseMs = context.pick(180_000, 40_000);
    const reference = await referenceLoad(context, { ...OTHER_LOAD, durationMs: context.pick(3_000, 500) });
    context.log(`bare server p99 ${ms(reference.latency.p99)} at ${OTHER_RATE}/s`);

    const setup = await floodHistory(context, events);
    const { server, flooder, other } = setup;
    context.log(`${events} events written in ${(setup.seedMs / 1000).toFixed(1)} s`);
    // Warm-up, as the ingest scenario's: one at a time, then the measured emit load for a while, so
    // the sandbox processes it needs are running before anything is measured.
    await warmUp(flooder.source.endpoint);
    await warmUp(other.source.endpoint);
    const warm = await runLoad({
      url: flooder.source.endpoint,
      concurrency: EMITTERS,
      durationMs: context.pick(2_000, 300),
      body: numberedBody,
    });
    await runLoad({ ...otherLoad(other, server.baseUrl, context.pick(1_000, 300)) });
    const stored = () => flooder.api.eventCount(flooder.source.id);
    const warmed = events + 50 + warm.ok;
    await waitForCount(stored, warmed, { stallMs: 5_000 });

    // (a) Emits: the flooder's endpoint at a fixed concurrency.
    const emit = await context.measure(server, () =>
      otherTenantDuring(other, server.baseUrl, phaseMs, () =>
        runLoad({ url: flooder.source.endpoint, concurrency: EMITTERS, durationMs: phaseMs, body: numberedBody }),
      ),
    );
    // Its runs finish before the next phase starts (the endpoint answers before the run).
    const afterEmits = await waitForCount(stored, warmed + emit.flood.ok, { stallMs: 5_000 });
    const historySize = afterEmits.count;
    context.log(`emits: ${perSec(emit.flood.okPerSec)} accepted; other p99 ${ms(emit.load.latency.p99)}`);

    // (b) History: pages of 100 with total_count, across channels and of the default channel.
    const reading = await context.measure(server, () =>
      otherTenantDuring(other, server.baseUrl, phaseMs, () =>
        runLoad({
          url: server.baseUrl,
          method: "GET",
          headers: { authorization: `Bearer ${flooder.apiKey}` },
          path: (i) =>
            `${new URL(server.baseUrl).pathname}/sources/${flooder.source.id}/event_summaries?limit=100${i % 2 ? "&event_name=default" : ""}`,
          concurrency: HISTORY_READERS,
          durationMs: phaseMs,
        }),
      ),
    );
    context.log(`history: ${perSec(reading.flood.okPerSec)} pages; other p99 ${ms(reading.load.latency.p99)}`);

    // (d) A stream resuming from before the first event: the whole history, then nothing.
    const streamUrl = `${server.root}/sources/${flooder.source.id}/sse`;
    const catchUp = await context.measure(server, () =>
      otherTenantDuring(other, server.baseUrl, longPhaseMs, async () => {
        const child = await spawnBenchChild(
          "bench/lib/sse-catch-up.ts",
          [streamUrl, flooder.apiKey, "1-0", String(historySize)],
          /connected (\d+)/,
        );
        try {
          if (child.match[1] !== "200") throw new Error(`the stream answered ${child.match[1]}`);
          const end = /(done|ended) (\d+) (\d+) (\S+)/;
          const found = await eventually(() => end.exec(child.output()) ?? undefined, "the end of the catch-up", {
            timeoutMs: longPhaseMs,
          });
          return { received: Number(found[2]), disorder: Number(found[3]), ended: found[1] === "ended" };
        } finally {
          await child.stop();
        }
      }),
    );
    const faults = Math.abs(historySize - catchUp.flood.received) + catchUp.flood.disorder;
    context.log(
      `catch-up of ${catchUp.flood.received} events in ${(catchUp.floodMs / 1000).toFixed(1)} s; other p99 ${ms(catchUp.load.latency.p99)}`,
    );

    // (c) Deleting everything, in one request.
    const deletion = await context.measure(server, () =>
      otherTenantDuring(other, server.baseUrl, longPhaseMs, () =>
        flooder.api.call("DELETE", `/sources/${flooder.source.id}/events`),
      ),
    );
    if (deletion.flood.status !== 202) throw new Error(`the deletion answered ${deletion.flood.status}`);
    const left = await stored();
    context.log(
      `deletion of ${historySize} events in ${(deletion.floodMs / 1000).toFixed(1)} s (${left} left); other p99 ${ms(deletion.load.latency.p99)}`,
    );

    const phases = { emit, history: reading, catchUp, deletion };
    const other99 = (phase: { load: LoadResult }) => phase.load.latency.p99;
    context.note(
      `History written through the SQLite adapter before start (bench/lib/flood-history.ts): ${events.toLocaleString("en-US")} events on one source of the first tenant; the second tenant (made with createLocalUser) reads a page of 10 of its own source's history at ${OTHER_RATE}/s (open loop, at most ${OTHER_LOAD.concurrency} in flight, latency from each request's due time) during each phase. Emits: ${EMITTERS} connections for ${phaseMs / 1000} s, ${perSec(emit.flood.okPerSec)} accepted. History: ${HISTORY_READERS} clients paging 100 events with total_count (half across channels, half of the default channel), ${perSec(reading.flood.okPerSec)}, their own p99 ${ms(reading.flood.latency.p99)}. Catch-up: ${catchUp.flood.received.toLocaleString("en-US")} of ${historySize.toLocaleString("en-US")} events in ${(catchUp.floodMs / 1000).toFixed(1)} s (${perSec((catchUp.flood.received * 1000) / catchUp.floodMs)}), read by a child process. Deletion: ${historySize.toLocaleString("en-US")} events in one DELETE, answered 202 after ${(deletion.floodMs / 1000).toFixed(1)} s. Other tenant's max per phase: ${Object.entries(
        phases,
      )
        .map(([name, phase]) => `${name} ${ms(phase.load.latency.max)}`)
        .join(", ")}.`,
    );
    return {
      rows: rows(
        events,
        {
          emit: other99(emit),
          history: other99(reading),
          catchUp: other99(catchUp),
          deletion: other99(deletion),
          catchUpFaults: faults,
        },
        reference.latency.p99,
      ),
      details: {
        events,
        seedMs: round(setup.seedMs),
        phaseMs,
        historyAtCatchUp: historySize,
        emits: loadDetails(emit.flood),
        historyReads: loadDetails(reading.flood),
        catchUp: { ...catchUp.flood, ms: round(catchUp.floodMs) },
        deletionMs: round(deletion.floodMs),
        other: Object.fromEntries(Object.entries(phases).map(([name, phase]) => [name, loadDetails(phase.load)])),
        reference: loadDetails(reference),
      },
    };
  },
};
