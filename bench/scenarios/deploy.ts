import { monoMs } from "../lib/clock.ts";
import { loadDetails, ms, referenceLoad } from "../lib/common.ts";
import { uniqueCode } from "../lib/components.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { sluiceApi } from "../lib/sluice-api.ts";
import { roundAll, summarize } from "../lib/stats.ts";

const rows = (deployP50?: number, updateP50?: number, referenceP50?: number): Row[] => [
  {
    scenario: "deploy",
    figure: "deploy a source, inline code, p50",
    measured: deployP50,
    unit: "ms",
    target: { kind: "atMost", value: 150 },
    ...(referenceP50 === undefined ? {} : { reference: `bare request ${ms(referenceP50)}` }),
  },
  {
    scenario: "deploy",
    figure: "update a source with new code, p50",
    measured: updateP50,
    unit: "ms",
    target: { kind: "atMost", value: 150 },
    ...(referenceP50 === undefined ? {} : { reference: `bare request ${ms(referenceP50)}` }),
  },
];

export const deploy: Scenario = {
  name: "deploy",
  title: "deploy and update a source with inline code and no npm packages, one at a time",
  deadlineMs: 120_000,
  quickDeadlineMs: 45_000,
  emptyRows: () => rows(),
  async run(context) {
    const count = context.pick(25, 3);
    const reference = await referenceLoad(context, {
      concurrency: 1,
      durationMs: context.pick(2_000, 500),
      body: () => JSON.stringify({ component_code: uniqueCode(0) }),
    });
    const server = await context.startServer();
    const api = sluiceApi(server);
    // The first deploys start esbuild's service and the sandbox: not what a user waits for later.
    for (let index = 0; index < 2; index++) await api.deploy(uniqueCode(-1 - index));
    const target = await api.deploy(uniqueCode(-10));

    const { deploys, updates } = await context.measure(server, async () => {
      const deploys: number[] = [];
      const updates: number[] = [];
      for (let index = 0; index < count; index++) {
        const start = monoMs();
        await api.deploy(uniqueCode(index));
        deploys.push(monoMs() - start);
      }
      for (let index = 0; index < count; index++) {
        const start = monoMs();
        const answer = await api.call("PUT", `/sources/${target.id}`, { component_code: uniqueCode(1000 + index) });
        if (answer.status !== 200)
          throw new Error(`PUT /sources answered ${answer.status}: ${JSON.stringify(answer.json)}`);
        updates.push(monoMs() - start);
      }
      return { deploys, updates };
    });
    const deploy = summarize(deploys);
    const update = summarize(updates);
    context.log(`deploy p50 ${ms(deploy.p50)}, update p50 ${ms(update.p50)}`);
    context.note(
      `${count} deploys (POST /v1/sources) and ${count} updates (PUT /v1/sources/{id}, new component_code), one at a time; every code differs, so each is bundled afresh. Deploy p99 ${ms(deploy.p99)}, update p99 ${ms(update.p99)}.`,
    );
    return {
      rows: rows(deploy.p50, update.p50, reference.latency.p50),
      details: { count, deployMs: roundAll(deploy), updateMs: roundAll(update), reference: loadDetails(reference) },
    };
  },
};
