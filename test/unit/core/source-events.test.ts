import { describe, expect, it } from "vitest";
import { deleteSourceEvents, listSourceEvents } from "#core/source-events";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { sourceRecord } from "../../support/source-record.ts";

/** Two accounts, a source of the first with five default-channel events and one log line. */
async function setUp(purgeLater: (sourceId: string) => Promise<void> = async () => {}) {
  const purged: string[] = [];
  const deps = memoryDeps(Date.UTC(2026, 10, 21), {
    purger: {
      purgeLater: async (sourceId) => {
        purged.push(sourceId);
        await purgeLater(sourceId);
      },
    },
  });
  const owner = await accountIn(deps, "owner");
  const stranger = await accountIn(deps, "stranger");
  const source = await deps.sources.createSource(sourceRecord(owner, "dc_history0000001"));
  const stored = await deps.events.appendEvents(
    source.id,
    [
      ...Array.from({ length: 5 }, (_, n) => ({ channel: "", event: { n }, emitId: `e${n}`, meta: {} })),
      { channel: "$logs", event: { message: "hi" }, emitId: "log", meta: {} },
    ],
    Date.UTC(2026, 10, 21),
  );
  return { deps, source, purged, stored, owner: { userId: owner.user.id }, stranger: { userId: stranger.user.id } };
}

describe("deleteSourceEvents", () => {
  it("hides the range at once and starts a purge of that source", async () => {
    const { deps, source, purged, stored, owner } = await setUp();
    const answer = await deleteSourceEvents(deps, owner, source.id, {
      start_id: stored[1]!.id,
      end_id: stored[3]!.id,
    });
    expect(answer).toEqual({ source_id: source.id, start_id: stored[1]!.id, end_id: stored[3]!.id, event_name: null });
    expect(purged).toEqual([source.id]);
    const left = await listSourceEvents(deps, owner, source.id, {});
    expect(left.data.map((e) => e.id)).toEqual([stored[4]!.id, stored[0]!.id]);
  });

  it("is 404 for another account's source and deletes nothing", async () => {
    const { deps, source, purged, stranger, owner } = await setUp();
    await expect(deleteSourceEvents(deps, stranger, source.id, {})).rejects.toMatchObject({ code: "not_found" });
    expect(purged).toEqual([]);
    expect((await listSourceEvents(deps, owner, source.id, {})).page_info.total_count).toBe(5);
  });

  it("validates ids before looking at the source", async () => {
    const { deps, source, stored, owner } = await setUp();
    await expect(
      deleteSourceEvents(deps, owner, source.id, { start_id: stored[3]!.id, end_id: stored[1]!.id }),
    ).rejects.toMatchObject({ code: "validation", message: expect.stringContaining("start_id") });
    // ms 9 is older than ms 10 although "9-0" > "10-0" as strings: the order is numeric.
    await deleteSourceEvents(deps, owner, source.id, { start_id: "9-0", end_id: "10-0" });
    for (const [field, value] of [
      ["start_id", "9"],
      ["end_id", "-1-0"],
      ["start_id", "1.5-0"],
    ] as const) {
      await expect(deleteSourceEvents(deps, owner, "dc_missing", { [field]: value })).rejects.toMatchObject({
        code: "validation",
        message: expect.stringContaining(field),
      });
    }
  });

  it("limits the deletion to one channel with event_name, `default` meaning the default channel", async () => {
    const { deps, source, owner } = await setUp();
    await deleteSourceEvents(deps, owner, source.id, { event_name: "default" });
    expect((await listSourceEvents(deps, owner, source.id, {})).data).toEqual([]);
    expect((await listSourceEvents(deps, owner, source.id, { event_name: "$logs" })).data).toHaveLength(1);
  });

  it("still answers when the purge cannot be started: the events are already hidden", async () => {
    const { deps, source, owner } = await setUp(async () => {
      throw new Error("lambda unavailable");
    });
    await deleteSourceEvents(deps, owner, source.id, {});
    expect((await listSourceEvents(deps, owner, source.id, { event_name: "$logs" })).data).toEqual([]);
  });
});

describe("listSourceEvents with expand=event", () => {
  it("answers large events in pages under 2 MiB, and its cursors reach every event once", async () => {
    const deps = memoryDeps(Date.UTC(2026, 10, 21));
    const owner = await accountIn(deps, "owner");
    const source = await deps.sources.createSource(sourceRecord(owner, "dc_bigevents00001"));
    // 30 events of 200 KB: 6 MB of JSON, three times what one answer may carry.
    const stored = await deps.events.appendEvents(
      source.id,
      Array.from({ length: 30 }, (_, n) => ({
        channel: "",
        event: { n, body: "z".repeat(200 * 1024) },
        emitId: `e${n}`,
        meta: {},
      })),
      Date.UTC(2026, 10, 21),
    );
    const caller = { userId: owner.user.id };
    const seen: string[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const page = await listSourceEvents(deps, caller, source.id, { expand: "event", ...(after ? { after } : {}) });
      expect(Buffer.byteLength(JSON.stringify(page.data))).toBeLessThanOrEqual(2 * 1024 * 1024);
      expect(page.data.length).toBeGreaterThan(0);
      expect(page.page_info.count).toBe(page.data.length);
      seen.push(...page.data.map((event) => event.id));
      if (seen.length === 30) break;
      after = page.page_info.end_cursor ?? undefined;
    }
    expect(seen).toEqual(stored.map((event) => event.id).reverse());
  });
});
