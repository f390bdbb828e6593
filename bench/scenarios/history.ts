import { monoMs } from "../lib/clock.ts";
import { loadDetails, ms, referenceLoad } from "../lib/common.ts";
import { buildFleet } from "../lib/fleet.ts";
import { Connection, serializeRequest } from "../lib/http1.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { round, roundAll, summarize } from "../lib/stats.ts";

const PAGE = 10;

const rows = (p50?: number, p99?: number, events = 100_000, ref?: { p50: number; p99: number }): Row[] => [
  {
    scenario: "history",
    figure: `event_summaries with cursors p50 (${events.toLocaleString("en-US")} events)`,
    measured: p50,
    unit: "ms",
    ...(ref ? { reference: `bare request ${ms(ref.p50)}` } : {}),
  },
  {
    scenario: "history",
    figure: `event_summaries with cursors p99 (${events.toLocaleString("en-US")} events)`,
    measured: p99,
    unit: "ms",
    target: { kind: "atMost", value: 10 },
    ...(ref ? { reference: `bare request ${ms(ref.p99)}` } : {}),
  },
];

export const history: Scenario = {
  name: "history",
  title: "history: 100,000 events across 1,000 sources, paged with cursors (one request at a time)",
  deadlineMs: 150_000,
  quickDeadlineMs: 60_000,
  emptyRows: () => rows(),
  async run(context) {
    const sources = context.pick(1000, 50);
    const perSource = 100;
    const durationMs = context.pick(8_000, 1_500);
    const reference = await referenceLoad(context, {
      method: "GET",
      concurrency: 1,
      durationMs: context.pick(3_000, 500),
    });
    const fleet = await buildFleet(context, { sources, eventsPerSource: perSource });
    const { server } = fleet;
    context.log(`${sources} sources with ${perSource} events each ready in ${(fleet.seedMs / 1000).toFixed(1)} s`);
    const url = new URL(server.baseUrl);
    const connection = new Connection(url.hostname, Number(url.port), 10_000);
    context.defer(() => connection.close());
    const get = async (path: string) => {
      const answer = await connection.send(
        serializeRequest(
          "GET",
          url.host,
          `${url.pathname}${path}`,
          { authorization: `Bearer ${server.apiKey}` },
          undefined,
        ),
      );
      if (answer.status !== 200)
        throw new Error(`GET ${path} answered ${answer.status}: ${answer.body.toString().slice(0, 300)}`);
      return JSON.parse(answer.body.toString("utf8"));
    };
    // Warm-up: the first reads of a connection and of the statements.
    for (const source of fleet.sources.slice(0, 20)) await get(`/sources/${source.id}/event_summaries?limit=${PAGE}`);

    const latencies: number[] = [];
    let pagesWalked = 0;
    let eventsSeen = 0;
    await context.measure(server, async () => {
      const end = monoMs() + durationMs;
      let walk = 0;
      while (monoMs() < end) {
        // Sources in a scattered order, each walked back from its newest page with `after` cursors.
        const source = fleet.sources[(walk++ * 7919) % fleet.sources.length]!;
        let cursor: string | undefined;
        do {
          const start = monoMs();
          const page = await get(
            `/sources/${source.id}/event_summaries?limit=${PAGE}${cursor ? `&after=${encodeURIComponent(cursor)}` : ""}`,
          );
          latencies.push(monoMs() - start);
          pagesWalked++;
          eventsSeen += page.data.length;
          cursor = page.data.length === PAGE ? page.page_info.end_cursor : undefined;
        } while (cursor && monoMs() < end);
      }
    });
    const latency = summarize(latencies);
    context.log(`${latencies.length} pages, p50 ${ms(latency.p50)}, p99 ${ms(latency.p99)}`);
    context.note(
      `History written through the SQLite adapter before start (bench/lib/fleet.ts): ${sources} sources × ${perSource} events. Pages of ${PAGE}, each source walked from its newest page with page_info.end_cursor as \`after\`; ${latencies.length} requests, ${eventsSeen} events read. Max ${ms(latency.max)}.`,
    );
    return {
      rows: rows(latency.p50, latency.p99, sources * perSource, reference.latency),
      details: {
        sources,
        eventsPerSource: perSource,
        seedMs: round(fleet.seedMs),
        pageSize: PAGE,
        pages: pagesWalked,
        latencyMs: roundAll(latency),
        reference: loadDetails(reference),
      },
    };
  },
};
