import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/** Emits a large event for each small request: the queued job fits where its event no longer does. */
const PADDED_EMITTER = `
export default {
  name: "Padded emitter",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit({ uid: event.body.uid, padding: "x".repeat(60000) }, { summary: event.body.uid });
  },
};
`;

/** The same with its own 200 (custom response): a 2xx that must stand for a stored event. */
const PADDED_RESPONDER = PADDED_EMITTER.replace(
  '"$.interface.http"',
  '{ type: "$.interface.http", customResponse: true }',
).replace("async run(event) {", "async run(event) {\n    this.http.respond({ status: 200, body: { ok: true } });");

const FULL = "the server's disk is full: the request was not stored; try again later";

async function post(endpoint: string, uid: string) {
  const answer = await fetch(endpoint, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ uid }),
  });
  const text = await answer.text();
  return { status: answer.status, text };
}

/**
 * Issue 12, item 11: a full disk, simulated portably with `SLUICE_DATABASE_MAX_MB` (SQLite's
 * `max_page_count`: past it every write that needs room fails with SQLITE_FULL, as on a full disk).
 * A request is answered 2xx only once what it produced is stored; what was accepted is stored once
 * room is back, without a restart.
 */
describe("local mode when its disk fills", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice({ env: { SLUICE_DATABASE_MAX_MB: "2" } });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  const uidsStored = async (sourceId: string) => {
    const uids: string[] = [];
    let newest: string | undefined;
    let cursor: string | undefined;
    for (;;) {
      const page = await api("GET", `/sources/${sourceId}/event_summaries${cursor ? `?after=${cursor}` : ""}`);
      newest ??= page.json.data[0]?.id;
      uids.push(...page.json.data.map((event: { metadata: { summary: string } }) => event.metadata.summary));
      cursor = page.json.page_info.end_cursor;
      if (!cursor || page.json.data.length === 0) return { uids, newest };
    }
  };

  it("answers 503 with a clear message, never a 2xx for what it could not store, and stores what it accepted once room is back", async () => {
    const ingest = await api("POST", "/sources", { component_code: PADDED_EMITTER });
    const responder = await api("POST", "/sources", { component_code: PADDED_RESPONDER });
    expect([ingest.status, responder.status]).toEqual([200, 200]);
    const endpointOf = (answer: typeof ingest) => answer.json.data.configured_props.http.endpoint_url as string;
    const ingestId = ingest.json.data.id as string;

    // Fill the data file one stored event at a time, until a run cannot store its event.
    const accepted: string[] = [];
    for (let i = 0; ; i++) {
      expect(i).toBeLessThan(200);
      const uid = `queued-${i}`;
      expect((await post(endpointOf(ingest), uid)).status).toBe(200);
      accepted.push(uid);
      const outcome = await eventually(
        async () => {
          if (sluice.output().includes("source runs paused")) return "full";
          const newest = await api("GET", `/sources/${ingestId}/event_summaries?limit=1`);
          return newest.json.data[0]?.metadata.summary === uid ? "stored" : undefined;
        },
        `the run of ${uid}`,
        { timeoutMs: 30_000 },
      );
      if (outcome === "full") break;
    }
    // The queued job of a request is small and may still fit: answered 200, it is stored later.
    for (const uid of ["queued-while-full-1", "queued-while-full-2"]) {
      const answer = await post(endpointOf(ingest), uid);
      if (answer.status === 200) accepted.push(uid);
      else expect(answer).toEqual({ status: 503, text: JSON.stringify({ error: FULL }) });
    }

    // A custom response is not sent as the component's 200 when its emit cannot be stored.
    const custom = await post(endpointOf(responder), "custom-while-full");
    expect(custom).toEqual({ status: 503, text: JSON.stringify({ error: FULL }) });
    // An API write is refused the same way; reads go on.
    const write = await api("POST", "/sources", { component_code: `// ${"x".repeat(200_000)}\n${PADDED_EMITTER}` });
    expect(write).toEqual({ status: 503, json: { error: FULL } });
    const before = await uidsStored(ingestId);
    expect(before.uids.length).toBeLessThan(accepted.length);
    expect((await uidsStored(responder.json.data.id)).uids).not.toContain("custom-while-full");

    // Room comes back (the history seen so far is deleted): every accepted request gets stored,
    // without a restart.
    const deleted = await api("DELETE", `/sources/${ingestId}/events?end_id=${before.newest}`);
    expect(deleted.status).toBe(202);
    const after = await eventually(
      async () => {
        const now = await uidsStored(ingestId);
        const seen = new Set([...before.uids, ...now.uids]);
        return accepted.every((uid) => seen.has(uid)) ? now : undefined;
      },
      "every accepted request's event, stored once room is back",
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(before.uids.length + after.uids.length).toBe(accepted.length);
    expect((await post(endpointOf(responder), "custom-after")).status).toBe(200);
    expect((await uidsStored(responder.json.data.id)).uids).toEqual(["custom-after"]);
  }, 120_000);
});
