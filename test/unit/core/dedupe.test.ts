import { describe, expect, it } from "vitest";
import type { DedupeState } from "#core/component-model";
import { applyDedupe, compareIds, DEDUPE_STRATEGIES, orderEmits, UNIQUE_CACHE_SIZE } from "#core/dedupe";
import type { EmitMeta, EmitRecord } from "#runtime/protocol";

const emit = (meta: EmitMeta, event: EmitRecord["event"] = null): EmitRecord => ({ event, meta });
const ids = (emits: EmitRecord[]) => emits.map((e) => e.meta.id);
const withIds = (...list: (string | number)[]) => list.map((id) => emit({ id }));

describe("orderEmits", () => {
  it("orders emits with ts oldest to newest", () => {
    const out = orderEmits([emit({ id: "c", ts: 300 }), emit({ id: "a", ts: 100 }), emit({ id: "b", ts: 200 })]);
    expect(ids(out)).toEqual(["a", "b", "c"]);
  });

  it("keeps call order for equal ts", () => {
    const out = orderEmits([emit({ id: "x", ts: 5 }), emit({ id: "y", ts: 5 }), emit({ id: "w", ts: 1 })]);
    expect(ids(out)).toEqual(["w", "x", "y"]);
  });

  it("leaves emits without ts at their position and sorts the others among their own positions", () => {
    const out = orderEmits([emit({ id: "A", ts: 5 }), emit({ id: "B" }), emit({ id: "C", ts: 1 }), emit({ id: "D" })]);
    expect(ids(out)).toEqual(["C", "B", "A", "D"]);
  });

  it("treats a non-numeric ts as absent and does not change its input", () => {
    const input = [emit({ id: "a", ts: 9 }), emit({ id: "b", ts: "1" as unknown as number }), emit({ id: "c", ts: 2 })];
    const out = orderEmits(input);
    expect(ids(out)).toEqual(["c", "b", "a"]);
    expect(ids(input)).toEqual(["a", "b", "c"]);
  });
});

describe("applyDedupe without a strategy", () => {
  it.each([[undefined], [""]])("accepts everything, ids or not, for strategy %j", (strategy) => {
    const emits = [emit({}), emit({ id: 1 }), emit({ id: 1 })];
    const state: DedupeState = { unique: ["1"] };
    const out = applyDedupe(strategy, emits, state);
    expect(out.accepted).toEqual(emits);
    expect(out.refused).toEqual([]);
    expect(out.state).toEqual(state);
    expect(out.warning).toBeUndefined();
  });

  it("treats an unknown strategy as none and says so in a warning", () => {
    const emits = withIds(1, 1);
    const out = applyDedupe("uniqe", emits, {});
    expect(out.accepted).toEqual(emits);
    expect(out.warning).toMatch(/unknown dedupe strategy "uniqe"/);
  });
});

describe("applyDedupe: emits without an id", () => {
  it.each(DEDUPE_STRATEGIES)("refuses them with a reason under %s and keeps the others", (strategy) => {
    const noId = emit({ summary: "no id" }, { id: "event-id-is-not-the-key" });
    const empty = emit({ id: "" });
    const out = applyDedupe(strategy, [noId, emit({ id: 7 }), empty], {});
    expect(ids(out.accepted)).toEqual([7]);
    expect(out.refused).toEqual([
      { emit: noId, reason: `emitted without an id under dedupe strategy ${strategy}`, kind: "missing_id" },
      { emit: empty, reason: `emitted without an id under dedupe strategy ${strategy}`, kind: "missing_id" },
    ]);
  });
});

describe("applyDedupe unique", () => {
  it.each([
    {
      name: "new ids pass and are cached as strings",
      state: {},
      batch: [1, "b"],
      accepted: [1, "b"],
      cache: ["1", "b"],
    },
    { name: "cached ids are refused", state: { unique: ["a"] }, batch: ["a", "b"], accepted: ["b"], cache: ["a", "b"] },
    {
      name: "repeats within one batch are refused",
      state: {},
      batch: ["a", "a", "b", "a"],
      accepted: ["a", "b"],
      cache: ["a", "b"],
    },
    {
      name: "a number and its string are the same id",
      state: { unique: ["5"] },
      batch: [5, "5"],
      accepted: [],
      cache: ["5"],
    },
  ])("$name", ({ state, batch, accepted, cache }) => {
    const out = applyDedupe("unique", withIds(...batch), state);
    expect(ids(out.accepted)).toEqual(accepted);
    expect(out.state.unique).toEqual(cache);
    expect(out.refused).toHaveLength(batch.length - accepted.length);
  });

  it("gives the id in the reason of a refused duplicate", () => {
    const out = applyDedupe("unique", withIds("a"), { unique: ["a"] });
    expect(out.refused[0]).toMatchObject({ reason: 'id "a" was already emitted (dedupe: unique)', kind: "duplicate" });
  });

  it("keeps 100 ids: the 101st evicts the first, which may then be emitted again", () => {
    const first = applyDedupe("unique", withIds(...Array.from({ length: 100 }, (_, i) => i)), {});
    expect(first.accepted).toHaveLength(100);
    expect(first.state.unique).toHaveLength(UNIQUE_CACHE_SIZE);

    const second = applyDedupe("unique", withIds(100), first.state);
    expect(second.state.unique).toHaveLength(100);
    expect(second.state.unique?.[0]).toBe("1");
    expect(second.state.unique?.at(-1)).toBe("100");

    // 0 was evicted, so it passes (and evicts 1); 50 is still cached.
    const third = applyDedupe("unique", withIds(0, 50), second.state);
    expect(ids(third.accepted)).toEqual([0]);
    expect(third.state.unique?.[0]).toBe("2");
  });

  it("evicts within one large batch, first in first out", () => {
    const out = applyDedupe("unique", withIds(...Array.from({ length: 150 }, (_, i) => `id-${i}`)), {});
    expect(out.accepted).toHaveLength(150);
    expect(out.state.unique).toEqual(Array.from({ length: 100 }, (_, i) => `id-${i + 50}`));
  });

  it("does not change the state it was given", () => {
    const state: DedupeState = { unique: ["a"] };
    applyDedupe("unique", withIds("b"), state);
    expect(state).toEqual({ unique: ["a"] });
  });
});

describe("applyDedupe greatest", () => {
  it.each([
    { name: "first batch: increasing ids all pass", cached: undefined, batch: [1, 2, 3], accepted: [1, 2, 3], next: 3 },
    { name: "ids not above the cache are refused", cached: 5, batch: [4, 5, 6], accepted: [6], next: 6 },
    {
      name: "a lower id after a higher one in the batch is refused",
      cached: undefined,
      batch: [3, 5, 4],
      accepted: [3, 5],
      next: 5,
    },
    { name: "numeric strings compare as numbers", cached: "9", batch: ["10", "8"], accepted: ["10"], next: "10" },
    { name: "a number against a numeric string", cached: 9, batch: ["10"], accepted: ["10"], next: "10" },
    {
      name: "ISO date strings compare as strings",
      cached: "2024-05-01T10:00:00Z",
      batch: ["2024-04-30T23:59:59Z", "2024-05-01T10:00:00Z", "2024-05-02T00:00:00Z"],
      accepted: ["2024-05-02T00:00:00Z"],
      next: "2024-05-02T00:00:00Z",
    },
    {
      name: "integers beyond 2^53 compare exactly",
      cached: "9007199254740993",
      batch: ["9007199254740992", "9007199254740994"],
      accepted: ["9007199254740994"],
      next: "9007199254740994",
    },
    { name: "nothing accepted keeps the cache", cached: 10, batch: [1, 2], accepted: [], next: 10 },
  ])("$name", ({ cached, batch, accepted, next }) => {
    const state: DedupeState = cached === undefined ? {} : { greatest: cached };
    const out = applyDedupe("greatest", withIds(...batch), state);
    expect(ids(out.accepted)).toEqual(accepted);
    expect(out.state.greatest).toEqual(next);
  });

  it("gives both ids in the reason", () => {
    const out = applyDedupe("greatest", withIds(4), { greatest: 5 });
    expect(out.refused[0]).toMatchObject({
      reason: "id 4 is not greater than 5 (dedupe: greatest)",
      kind: "duplicate",
    });
  });

  it.each([
    [2, 10, -1],
    ["2", "10", -1],
    ["1.5", 1, 1],
    ["1e3", "999", 1],
    ["abc", "abd", -1],
    ["10", "9a", -1], // one side not numeric: string order
    [7, "7", 0],
  ])("compareIds(%j, %j) is %d", (a, b, sign) => {
    expect(compareIds(a, b)).toBe(sign);
  });
});

describe("applyDedupe last", () => {
  it.each([
    {
      name: "no cache: all pass, cache is the last one",
      cached: undefined,
      batch: ["a", "b", "c"],
      accepted: ["a", "b", "c"],
      next: "c",
    },
    {
      name: "only the events after the match pass",
      cached: "b",
      batch: ["a", "b", "c", "d"],
      accepted: ["c", "d"],
      next: "d",
    },
    { name: "no match: all pass", cached: "z", batch: ["a", "b"], accepted: ["a", "b"], next: "b" },
    { name: "the match is the newest: nothing passes", cached: "c", batch: ["a", "b", "c"], accepted: [], next: "c" },
    { name: "ids match as strings", cached: 2, batch: ["1", "2", "3"], accepted: ["3"], next: "3" },
    {
      name: "the last match counts when an id repeats",
      cached: "a",
      batch: ["a", "b", "a", "c"],
      accepted: ["c"],
      next: "c",
    },
  ])("$name", ({ cached, batch, accepted, next }) => {
    const state: DedupeState = cached === undefined ? {} : { last: cached };
    const out = applyDedupe("last", withIds(...batch), state);
    expect(ids(out.accepted)).toEqual(accepted);
    expect(out.state.last).toEqual(next);
    expect(out.refused).toHaveLength(batch.length - accepted.length);
  });

  it("with ts, caches the newest event after ordering", () => {
    const batch = [emit({ id: "new", ts: 300 }), emit({ id: "old", ts: 100 }), emit({ id: "mid", ts: 200 })];
    const out = applyDedupe("last", orderEmits(batch), {});
    expect(ids(out.accepted)).toEqual(["old", "mid", "new"]);
    expect(out.state.last).toBe("new");

    const again = applyDedupe("last", orderEmits([emit({ id: "newer", ts: 400 }), ...batch]), out.state);
    expect(ids(again.accepted)).toEqual(["newer"]);
    expect(again.state.last).toBe("newer");
  });

  it("keys on the id of the emit options, never on event.id", () => {
    const batch = [emit({ id: "meta-1" }, { id: "same" }), emit({ id: "meta-2" }, { id: "same" })];
    expect(applyDedupe("unique", batch, {}).accepted).toHaveLength(2);
    expect(applyDedupe("last", batch, { last: "same" }).accepted).toHaveLength(2);
  });
});
