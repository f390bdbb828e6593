import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import { createLocalUser } from "#local-mode/bootstrap";
import { DATABASE_FILE } from "#local-mode/composition";
import { apiClient } from "../support/api-client.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { openRawStream } from "../support/sse-client.ts";

/**
 * Local mode serves every tenant from one process: one tenant's long history must not hold up the
 * others. A large history is written straight into the data file through the store (the API would
 * take minutes), then one tenant's operation over all of it runs while another tenant keeps
 * sending requests, which must be answered while that operation is still going on. No durations
 * are asserted (the bench measures them): only that the other tenant got answers in between.
 */
const HISTORY = 100_000;
/** Answers the other tenant must get while the flood operation runs; the old code let at most one through. */
const ANSWERS_MEANWHILE = 5;

const CODE = `export default {
  name: "Flood",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit(event.body); },
};
`;

describe("another tenant is answered while one tenant's history is deleted or streamed", () => {
  let sluice: SluiceProcess;
  let flooder: ReturnType<typeof apiClient>;
  let other: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice();
    flooder = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const created = await createLocalUser(sluice.dataDir, { username: "other", email: "other@example.com" });
    other = apiClient(sluice.baseUrl, created.apiKey);
  });

  afterAll(async () => {
    await sluice?.stop();
  });

  async function sourceWithHistory(): Promise<{ id: string; lastId: string }> {
    const created = await flooder("POST", "/sources", { component_code: CODE });
    expect(created.status).toBe(200);
    const id: string = created.json.data.id;
    // The server's own file, written beside it (WAL: the server keeps serving meanwhile).
    const db = openSqlite(join(sluice.dataDir, DATABASE_FILE));
    let lastId = "";
    try {
      const store = new SqliteEventStore(db);
      const start = Date.now() - 60_000;
      for (let from = 0; from < HISTORY; from += 5000) {
        const batch = Array.from({ length: 5000 }, (_, i) => ({
          channel: "",
          event: { n: from + i },
          emitId: randomUUID(),
          meta: {},
        }));
        lastId = (await store.appendEvents(id, batch, start + from / 5000)).at(-1)?.id ?? lastId;
      }
    } finally {
      db.close();
    }
    const page = await flooder("GET", `/sources/${id}/event_summaries?limit=1`);
    expect(page.json.page_info.total_count).toBe(HISTORY);
    return { id, lastId };
  }

  /** Runs the other tenant's requests one after another until `flood` settles; how many were answered before it. */
  async function answersDuring(flood: Promise<unknown>): Promise<number> {
    let settled = false;
    const done = flood.finally(() => (settled = true));
    let answered = 0;
    while (!settled) {
      const answer = await other("GET", "/users/me");
      expect(answer.status).toBe(200);
      if (!settled) answered++;
    }
    await done;
    return answered;
  }

  it("answers while one tenant deletes all the events of a source", { timeout: 120_000 }, async () => {
    const { id } = await sourceWithHistory();
    const deletion = flooder("DELETE", `/sources/${id}/events`);
    expect(await answersDuring(deletion)).toBeGreaterThanOrEqual(ANSWERS_MEANWHILE);
    expect((await deletion).status).toBe(202);
    const page = await flooder("GET", `/sources/${id}/event_summaries?limit=1`);
    expect(page.json).toMatchObject({ page_info: { total_count: 0 }, data: [] });
  });

  it("answers while one tenant deletes a source with its events", { timeout: 120_000 }, async () => {
    const { id } = await sourceWithHistory();
    const deletion = flooder("DELETE", `/sources/${id}`);
    expect(await answersDuring(deletion)).toBeGreaterThanOrEqual(ANSWERS_MEANWHILE);
    expect((await deletion).status).toBe(200);
    expect((await flooder("GET", `/sources/${id}`)).status).toBe(404);
  });

  it("answers while one tenant's live stream catches up from its first event", { timeout: 120_000 }, async () => {
    const { id, lastId } = await sourceWithHistory();
    const root = sluice.baseUrl.replace(/\/v1$/, "");
    const stream = await openRawStream(`${root}/sources/${id}/sse`, {
      authorization: `Bearer ${sluice.apiKeyFromFile()}`,
      "last-event-id": "1-0",
    });
    try {
      // The catch-up is over once the last event of the history has arrived.
      const caughtUp = (async () => {
        while (stream.messages.at(-1)?.id !== lastId) {
          if (stream.ended()) throw new Error("the stream ended before it caught up");
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      })();
      expect(await answersDuring(caughtUp)).toBeGreaterThanOrEqual(ANSWERS_MEANWHILE);
      expect(stream.messages).toHaveLength(HISTORY);
    } finally {
      stream.close();
    }
  });
});
