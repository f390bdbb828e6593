import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compareEventIds } from "#core/event-ids";
import { route as deleteSourceEvents } from "#http/delete-source-events";
import { route as listSourceEvents } from "#http/list-source-events";
import { apiClient, inBatches } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/** Emits what it is sent, on the channel it is told, logs a line, and throws when asked to. */
const HISTORY_SOURCE = `
export default {
  name: "History source",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    const body = event.body ?? {};
    console.log("got", body.n);
    if (body.fail) throw new Error("asked to fail");
    this.$emit({ n: body.n, pad: body.pad }, { summary: "n=" + body.n, ...(body.channel ? { name: body.channel } : {}) });
  },
};
`;

interface Summary {
  id: string;
  indexed_at_ms: number;
  event: { n?: number; pad?: string; $truncated?: boolean; size_bytes?: number; preview?: string } & Record<
    string,
    unknown
  >;
  metadata: { name: string; summary?: string; emitter_id: string; truncated?: boolean };
}

describe("event history and deletion over real HTTP against local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;

  async function deploy(): Promise<{ id: string; endpoint: string }> {
    const created = await api("POST", "/sources", { component_code: HISTORY_SOURCE });
    expect(created.status).toBe(200);
    return { id: created.json.data.id, endpoint: created.json.data.configured_props.http.endpoint_url };
  }

  async function emit(endpoint: string, bodies: Record<string, unknown>[]) {
    await inBatches(bodies, 10, async (body) => {
      const answer = await fetch(endpoint, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(answer.status).toBe(200);
      await answer.arrayBuffer();
    });
  }

  async function list(sourceId: string, query = "") {
    const answer = await api("GET", `/sources/${sourceId}/event_summaries${query}`);
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(listSourceEvents.response.safeParse(answer.json).error).toBeUndefined();
    return answer.json as {
      page_info: { total_count: number; count: number; start_cursor: string | null; end_cursor: string | null };
      data: Summary[];
    };
  }

  /** Every event of the default listing, newest first, through `after` cursors. */
  async function listAll(sourceId: string, extra = "") {
    const all: Summary[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 20; pages++) {
      const page = await list(sourceId, `?limit=100${extra}${cursor ? `&after=${cursor}` : ""}`);
      all.push(...page.data);
      if (page.data.length < 100) return all;
      cursor = page.page_info.end_cursor;
    }
    throw new Error("more pages than expected");
  }

  async function untilCount(sourceId: string, count: number, query = "") {
    return eventually(async () => {
      const page = await list(sourceId, `?limit=1${query}`);
      return page.page_info.total_count >= count ? page.page_info.total_count : undefined;
    }, `${count} events`);
  }

  beforeAll(async () => {
    sluice = await startSluice({ env: { SLUICE_INVOCATION_TIMEOUT_MS: "3000" } });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("keeps 250 events and pages through all of them with cursors, consistently while more arrive", async () => {
    const source = await deploy();
    await emit(
      source.endpoint,
      Array.from({ length: 250 }, (_, n) => ({ n })),
    );
    expect(await untilCount(source.id, 250)).toBe(250);

    // The default page is the last 100, newest first.
    const first = await list(source.id);
    expect(first.page_info).toMatchObject({ total_count: 250, count: 100 });
    expect(first.page_info.start_cursor).toEqual(expect.any(String));

    // New events arrive between pages: the cursor still continues where the first page ended.
    await emit(source.endpoint, [{ n: 1000 }, { n: 1001 }, { n: 1002 }]);
    await untilCount(source.id, 253);
    const second = await list(source.id, `?after=${first.page_info.end_cursor}`);
    const third = await list(source.id, `?after=${second.page_info.end_cursor}`);
    expect(second.page_info.count).toBe(100);
    expect(third.page_info.count).toBe(50);
    const pages = [...first.data, ...second.data, ...third.data];
    expect(new Set(pages.map((e) => e.event.n))).toEqual(new Set(Array.from({ length: 250 }, (_, n) => n)));
    for (let i = 1; i < pages.length; i++) expect(compareEventIds(pages[i - 1]!.id, pages[i]!.id)).toBeGreaterThan(0);
    const end = await list(source.id, `?after=${third.page_info.end_cursor}`);
    expect(end.page_info).toMatchObject({ count: 0, start_cursor: null, end_cursor: null, total_count: 253 });

    // `before` the first page's start: exactly the three that arrived since.
    const fresh = await list(source.id, `?before=${first.page_info.start_cursor}`);
    expect(fresh.data.map((e) => e.event.n).sort()).toEqual([1000, 1001, 1002]);
    expect(fresh.page_info.count).toBe(3);

    // `limit` N: the last N.
    const seven = await list(source.id, "?limit=7");
    expect(seven.data.map((e) => e.id)).toEqual([...fresh.data, ...first.data].slice(0, 7).map((e) => e.id));
  });

  it("answers 400 for bad limits, cursors and their combination", async () => {
    const source = await deploy();
    for (const query of [
      "?limit=0",
      "?limit=101",
      "?limit=abc",
      "?after=not*a*cursor",
      "?before=%20",
      "?after=MTpub3RhbmlkCg",
    ]) {
      const answer = await api("GET", `/sources/${source.id}/event_summaries${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.json.error, query).toEqual(expect.any(String));
    }
    const both = await list(source.id, "?limit=1");
    const cursor = Buffer.from("1:1-0").toString("base64url");
    const combined = await api("GET", `/sources/${source.id}/event_summaries?after=${cursor}&before=${cursor}`);
    expect(combined.status).toBe(400);
    expect(combined.json.error).toContain("after");
    expect(both.page_info.total_count).toBe(0);
  });

  it("truncates data over 1 KB unless expand=event, names channels, and lists $logs and $errors", async () => {
    const source = await deploy();
    await emit(source.endpoint, [
      { n: 1, pad: "x".repeat(3000) },
      { n: 2, channel: "odd" },
      { n: 3, fail: true },
    ]);
    await untilCount(source.id, 1, "&event_name=$errors");
    await untilCount(source.id, 2);

    const events = (await list(source.id)).data;
    const big = events.find((e) => e.metadata.summary === "n=1")!;
    expect(big.event.$truncated).toBe(true);
    expect(big.event.size_bytes).toBeGreaterThan(3000);
    expect(big.metadata.truncated).toBe(true);
    const expanded = (await list(source.id, "?expand=event")).data.find((e) => e.metadata.summary === "n=1")!;
    expect(expanded.event.pad).toHaveLength(3000);
    expect(expanded.metadata.truncated).toBeUndefined();

    expect(events.find((e) => e.event.n === 2)?.metadata.name).toBe("odd");
    expect(big.metadata.name).toBe("");
    expect((await list(source.id, "?event_name=odd")).data.map((e) => e.event.n)).toEqual([2]);
    expect((await list(source.id, "?event_name=default")).data.map((e) => e.metadata.summary)).toEqual(["n=1"]);

    const logs = await eventually(async () => {
      const page = await list(source.id, "?event_name=$logs");
      return page.data.length >= 3 ? page.data : undefined;
    }, "three log lines");
    expect(logs.map((e) => e.event.message).sort()).toEqual(["got 1", "got 2", "got 3"]);
    expect(logs.every((e) => e.metadata.name === "$logs")).toBe(true);

    const [error] = (await list(source.id, "?event_name=$errors&expand=event")).data;
    expect(error?.event).toMatchObject({
      original_event: { body: { n: 3, fail: true } },
      error: {
        code: "Error",
        cellId: expect.any(String),
        ts: expect.any(String),
        stack: expect.stringContaining("asked to fail"),
      },
    });
    expect((error!.event as { error: { ts: string } }).error.ts).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it("deletes exactly the range asked for, answering 202, and later reads never show it", async () => {
    const source = await deploy();
    await emit(
      source.endpoint,
      Array.from({ length: 60 }, (_, n) => ({ n })),
    );
    await untilCount(source.id, 60);
    const ascending = (await listAll(source.id)).reverse();
    const idAt = (i: number) => ascending[i]!.id;
    const remaining = async () => (await listAll(source.id)).map((e) => e.id).reverse();
    let expected = ascending.map((e) => e.id);
    const remove = async (query: string) => {
      const answer = await api("DELETE", `/sources/${source.id}/events${query}`);
      expect(answer.status, JSON.stringify(answer.json)).toBe(202);
      expect(deleteSourceEvents.response.safeParse(answer.json).error).toBeUndefined();
      return answer;
    };

    // Both ids: the inclusive range.
    await remove(`?start_id=${idAt(10)}&end_id=${idAt(19)}`);
    expected = expected.filter((_, i) => i < 10 || i > 19);
    expect(await remaining()).toEqual(expected);

    // The same id twice: that one event.
    await remove(`?start_id=${idAt(30)}&end_id=${idAt(30)}`);
    expected = expected.filter((id) => id !== idAt(30));
    expect(await remaining()).toEqual(expected);

    // end_id only: from the oldest to it.
    await remove(`?end_id=${idAt(4)}`);
    expected = expected.filter((id) => compareEventIds(id, idAt(4)) > 0);
    expect(await remaining()).toEqual(expected);

    // start_id only: from it to the newest.
    await remove(`?start_id=${idAt(50)}`);
    expected = expected.filter((id) => compareEventIds(id, idAt(50)) < 0);
    expect(await remaining()).toEqual(expected);
    expect((await list(source.id, "?limit=1")).page_info.total_count).toBe(expected.length);

    // Nothing: everything, logs included. The source keeps working afterwards.
    await remove("");
    expect(await remaining()).toEqual([]);
    expect((await list(source.id, "?event_name=$logs")).data).toEqual([]);
    await emit(source.endpoint, [{ n: 99 }]);
    await untilCount(source.id, 1);
    expect((await list(source.id)).data.map((e) => e.event.n)).toEqual([99]);
  });

  it("deletes one channel only when event_name is given", async () => {
    const source = await deploy();
    await emit(source.endpoint, [{ n: 1 }, { n: 2, channel: "odd" }, { n: 3, channel: "odd" }]);
    await untilCount(source.id, 3);
    expect((await api("DELETE", `/sources/${source.id}/events?event_name=odd`)).status).toBe(202);
    expect((await list(source.id)).data.map((e) => e.event.n)).toEqual([1]);
    expect((await list(source.id, "?event_name=$logs")).data).toHaveLength(3);
  });

  // Another account's source is 404 too: local mode has one account, so that is covered in
  // test/unit/core/source-events.test.ts.
  it("answers 400 for bad ids and 404 for an unknown source, deleting nothing", async () => {
    const source = await deploy();
    await emit(source.endpoint, [{ n: 1 }, { n: 2 }]);
    await untilCount(source.id, 2);
    const [newest, oldest] = (await list(source.id)).data.map((e) => e.id) as [string, string];
    const bad: [string, string][] = [
      ["?start_id=abc", "start_id"],
      ["?end_id=1-x", "end_id"],
      ["?start_id=", "start_id"],
      ["?end_id=12345678901234567-0", "end_id"],
      [`?start_id=${newest}&end_id=${oldest}`, "start_id"],
      [`?event_name=${"x".repeat(129)}`, "event_name"],
    ];
    for (const [query, field] of bad) {
      const answer = await api("DELETE", `/sources/${source.id}/events${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.json.error, query).toContain(field);
    }
    expect((await api("DELETE", "/sources/dc_doesnotexist000/events")).status).toBe(404);
    expect((await list(source.id)).page_info.total_count).toBe(2);
  });
});
