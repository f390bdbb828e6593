import { runBadInput } from "../bad-input.ts";
import { monoMs } from "../lib/clock.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";

const rows = (requests?: number, serverErrors?: number, badShape?: number, up?: number): Row[] => [
  {
    scenario: "bad input",
    figure: `5xx answers${requests === undefined ? "" : ` of ${requests.toLocaleString("en-US")} generated requests`}`,
    measured: serverErrors,
    unit: "count",
    target: { kind: "equals", value: 0 },
  },
  {
    scenario: "bad input",
    figure: "answers without the error shape",
    measured: badShape,
    unit: "count",
    target: { kind: "equals", value: 0 },
  },
  {
    scenario: "bad input",
    figure: "server still up afterwards (1 = yes)",
    measured: up,
    unit: "count",
    target: { kind: "equals", value: 1 },
  },
];

export const badInput: Scenario = {
  name: "bad-input",
  title: "bad input at volume: requests generated from the OpenAPI document (bench/bad-input.ts)",
  deadlineMs: 150_000,
  quickDeadlineMs: 45_000,
  emptyRows: () => rows(),
  async run(context) {
    const count = context.pick(5_000, 100);
    const server = await context.startServer();
    const start = monoMs();
    const result = await context.measure(server, () =>
      runBadInput({ baseUrl: server.baseUrl, apiKey: server.apiKey, count, seed: 6 }),
    );
    const seconds = (monoMs() - start) / 1000;
    const alive = await fetch(`${server.baseUrl}/users/me`, { headers: { authorization: `Bearer ${server.apiKey}` } })
      .then((answer) => (answer.status === 200 ? 1 : 0))
      .catch(() => 0);
    const exited = server.sluice.child.exitCode !== null || server.sluice.child.signalCode !== null;
    const up = alive === 1 && !exited ? 1 : 0;
    context.log(
      `${result.requests} requests in ${seconds.toFixed(1)} s: ${result.serverErrors} 5xx, ${result.badShape} bad shapes`,
    );
    context.note(`${result.requests} requests (seed 6) in ${seconds.toFixed(1)} s.`);
    for (const example of result.examples.slice(0, 5)) context.note(`example: ${example}`);
    return {
      rows: rows(result.requests, result.serverErrors, result.badShape, up),
      details: { count, seconds, ...result, examples: result.examples.slice(0, 20) },
    };
  },
};
