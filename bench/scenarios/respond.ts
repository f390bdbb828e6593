import { loadDetails, ms, numberedBody, referenceLoad, WARMUP_REQUESTS, warmUp } from "../lib/common.ts";
import { RESPOND_CODE } from "../lib/components.ts";
import { runLoad } from "../lib/load.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { sluiceApi } from "../lib/sluice-api.ts";

const rows = (p50?: number, p99?: number, ref?: { p50: number; p99: number }): Row[] => [
  {
    scenario: "respond",
    figure: "custom response round trip p50 (c=1)",
    measured: p50,
    unit: "ms",
    ...(ref ? { reference: `bare ${ms(ref.p50)}` } : {}),
  },
  {
    scenario: "respond",
    figure: "custom response round trip p99 (c=1)",
    measured: p99,
    unit: "ms",
    target: { kind: "atMost", value: 10 },
    ...(ref ? { reference: `bare ${ms(ref.p99)}` } : {}),
  },
];

export const respond: Scenario = {
  name: "respond",
  title: "custom response round trip: the run answers the request itself; concurrency 1",
  deadlineMs: 90_000,
  quickDeadlineMs: 40_000,
  emptyRows: () => rows(),
  async run(context) {
    const durationMs = context.pick(8_000, 1_500);
    const reference = await referenceLoad(context, {
      concurrency: 1,
      durationMs: context.pick(4_000, 1_000),
      body: numberedBody,
    });
    const server = await context.startServer();
    const source = await sluiceApi(server).deploy(RESPOND_CODE);
    await warmUp(source.endpoint);
    const load = await context.measure(server, () =>
      runLoad({ url: source.endpoint, concurrency: 1, durationMs, body: numberedBody }),
    );
    if (load.ok !== load.sent)
      throw new Error(`only ${load.ok} of ${load.sent} answers were 2xx: ${JSON.stringify(load.statuses)}`);
    context.log(`p50 ${ms(load.latency.p50)}, p99 ${ms(load.latency.p99)} over ${load.ok} requests`);
    context.note(
      `${load.ok} requests one at a time for ${durationMs / 1000} s after ${WARMUP_REQUESTS} warm-up requests.`,
    );
    return {
      rows: rows(load.latency.p50, load.latency.p99, reference.latency),
      details: { durationMs, load: loadDetails(load), reference: loadDetails(reference) },
    };
  },
};
