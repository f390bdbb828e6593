import { randomInt } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newDataDir, type SluiceProcess, startSluice } from "../support/local-process.ts";
import {
  apiOperations,
  type FuzzSummary,
  type FuzzTargets,
  type OpenApiDocument,
  prepareTargets,
  runFuzz,
  sampleRequests,
} from "../support/openapi-arbitraries.ts";

/**
 * Bad input at volume (issue 6): requests generated from the running server's own OpenAPI
 * document, sent concurrently. No answer is a 5xx, every failure has the error shape of README
 * "Errors", another account's ids never succeed, and the server is still up afterwards.
 *
 * Two runs: a fixed seed (the same requests every time) and a random one, printed on failure.
 * Replay a failure with FUZZ_SEED=<seeds>, the runs' seeds in order, comma-separated (a run starts
 * from what the earlier ones left); FUZZ_COUNT sets the requests per run. A failure's report ends
 * with the server's error lines, which say what failed inside.
 */
const FIXED_SEED = 20_261_121;
const COUNT = Number(process.env.FUZZ_COUNT ?? 600);
const CONCURRENCY = 16;

/** The server's log lines at level error (a 5xx's cause among them), the newest 20. */
const errorLines = (output: string) =>
  output
    .split("\n")
    .filter((line) => line.includes('"level":"error"'))
    .slice(-20)
    .join("\n");

describe("bad input at volume", () => {
  let sluice: SluiceProcess;
  let key: string;
  let document: OpenApiDocument;
  let targets: FuzzTargets;

  beforeAll(async () => {
    const dataDir = newDataDir();
    // Another account first, in the same data dir: its ids are the ones the fuzzed requests must not reach.
    const other = await startSluice({
      dataDir,
      env: { SLUICE_USERNAME: "mallory", SLUICE_EMAIL: "mallory@example.com" },
    });
    let foreign: Awaited<ReturnType<typeof prepareTargets>>;
    try {
      foreign = await prepareTargets(other.baseUrl, other.apiKeyFromFile());
    } finally {
      await other.stop();
    }
    sluice = await startSluice({ dataDir });
    key = sluice.apiKeyFromFile();
    document = (await (await fetch(`${sluice.baseUrl}/openapi.json`)).json()) as OpenApiDocument;
    const own = await prepareTargets(sluice.baseUrl, key);
    targets = {
      apiKey: key,
      ownIds: own.ids,
      foreignIds: foreign.ids,
      endpointKeys: [...own.endpointKeys, ...foreign.endpointKeys],
      cursors: [...own.cursors, ...foreign.cursors],
      propNames: own.propNames,
    };
  }, 60_000);

  afterAll(async () => {
    await sluice?.stop();
  });

  it("answers generated bad requests without a 5xx, in the error shape, and stays up", async () => {
    const replay = process.env.FUZZ_SEED;
    const seeds = replay ? replay.split(",").map(Number) : [FIXED_SEED, randomInt(2 ** 31)];
    const origin = sluice.baseUrl.replace(/\/v1$/, "");
    const runs: { seed: number; summary: FuzzSummary }[] = [];
    for (const seed of seeds) {
      const requests = sampleRequests(document, targets, COUNT, seed);
      runs.push({ seed, summary: await runFuzz({ origin, requests, concurrency: CONCURRENCY }) });
    }

    const failed = runs.filter(
      ({ summary: s }) => s.serverErrors + s.badShape + s.noAnswer + s.foreignSuccess > 0 || s.requests !== COUNT,
    );
    const report = failed.map(({ seed, summary: s }) =>
      [
        `seed ${seed} (replay with FUZZ_SEED=${seeds.slice(0, seeds.indexOf(seed) + 1).join(",")}): ` +
          `${s.serverErrors} 5xx, ${s.badShape} bad shape, ` +
          `${s.noAnswer} unanswered, ${s.foreignSuccess} foreign successes of ${s.requests}`,
        ...s.examples,
      ].join("\n"),
    );
    if (report.length > 0) report.push(`the server's error lines:\n${errorLines(sluice.output())}`);
    expect(report, report.join("\n\n")).toEqual([]);

    // The requests reached every operation of the document and every kind of refusal.
    const total = (pick: (s: FuzzSummary) => Record<string, number>) => {
      const sum: Record<string, number> = {};
      for (const { summary } of runs) {
        for (const [name, n] of Object.entries(pick(summary))) sum[name] = (sum[name] ?? 0) + n;
      }
      return sum;
    };
    const operations = Object.keys(total((s) => s.operations));
    for (const operation of apiOperations(document)) expect(operations).toContain(operation.operationId);
    expect(operations).toEqual(expect.arrayContaining(["live-stream", "workflow-live-stream", "endpoint", "unrouted"]));
    expect(Object.keys(total((s) => s.statuses))).toEqual(
      expect.arrayContaining(["200", "400", "401", "404", "405", "413", "415"]),
    );

    // Still up: the process runs and answers.
    expect(sluice.child.exitCode).toBeNull();
    const me = await fetch(`${sluice.baseUrl}/users/me`, { headers: { authorization: `Bearer ${key}` } });
    expect(me.status).toBe(200);
  }, 60_000);
});
