/**
 * Bad input at volume, the bench's larger run of test/e2e/fault-bad-input.test.ts: requests
 * generated from the server's own OpenAPI document (test/support/openapi-arbitraries.ts), sent
 * 16 at a time.
 */
import { randomInt } from "node:crypto";
import { type OpenApiDocument, prepareTargets, runFuzz, sampleRequests } from "../test/support/openapi-arbitraries.ts";

export interface BadInputOptions {
  /** The API's base, ending in `/v1` (as printed by "Sluice is ready at ..."). */
  baseUrl: string;
  apiKey: string;
  count: number;
  /** The same seed sends the same requests. @default a random one, returned */
  seed?: number;
  /** @default 16 */
  concurrency?: number;
}

export interface BadInputResult {
  requests: number;
  /** 5xx answers, and requests that got no answer at all (a reset connection, a timeout). */
  serverErrors: number;
  /** Failures without the error shape of README "Errors" (JSON `{error}`, a JSON type, `x-request-id`). */
  badShape: number;
  /** Up to 20 failures, each with its request and answer. */
  examples: string[];
  seed: number;
  /** How many answers had each status. */
  statuses: Record<number, number>;
}

/** Requests are generated and sent in batches, so a large count never sits in memory at once. */
const BATCH = 1_000;

export async function runBadInput(options: BadInputOptions): Promise<BadInputResult> {
  const { baseUrl, apiKey, count, concurrency = 16 } = options;
  const seed = options.seed ?? randomInt(2 ** 31);
  const origin = baseUrl.replace(/\/v1\/?$/, "");
  const document = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as OpenApiDocument;
  const prepared = await prepareTargets(baseUrl, apiKey);
  const targets = {
    apiKey,
    ownIds: prepared.ids,
    endpointKeys: prepared.endpointKeys,
    cursors: prepared.cursors,
    propNames: prepared.propNames,
  };
  const result: BadInputResult = { requests: 0, serverErrors: 0, badShape: 0, examples: [], seed, statuses: {} };
  for (let batch = 0; result.requests < count; batch++) {
    const size = Math.min(BATCH, count - result.requests);
    const requests = sampleRequests(document, targets, size, seed + batch);
    const summary = await runFuzz({ origin, requests, concurrency, maxExamples: 20 - result.examples.length });
    result.requests += summary.requests;
    result.serverErrors += summary.serverErrors + summary.noAnswer;
    result.badShape += summary.badShape + summary.foreignSuccess;
    result.examples.push(...summary.examples.map((example) => `seed ${seed + batch}: ${example}`));
    for (const [status, n] of Object.entries(summary.statuses)) {
      result.statuses[Number(status)] = (result.statuses[Number(status)] ?? 0) + n;
    }
  }
  return result;
}
