import { describe, expect, it } from "vitest";
import type { StoredEvent } from "#core/component-model";
import {
  DELAYED_EMIT_MAX_AHEAD_MS,
  DELAYED_EMITS_MAX_PENDING,
  delayedEntriesOf,
  planDelayedEmits,
  splitDelayed,
} from "#core/delayed-emits";
import type { EmitRecord } from "#runtime/protocol";

const NOW = Date.UTC(2026, 10, 26, 12);
const emit = (id: string, delivery_ts?: number, name?: string): EmitRecord => ({
  event: { id },
  meta: { id, ...(delivery_ts === undefined ? {} : { delivery_ts }), ...(name === undefined ? {} : { name }) },
});
let n = 0;
const newId = () => {
  n += 1;
  return `e${n}`;
};

describe("delayed emits: what is delayed and what is refused", () => {
  it("delays only a delivery_ts more than a second ahead", () => {
    const { immediate, delayed } = splitDelayed(
      [emit("now"), emit("past", NOW - 5), emit("soon", NOW + 1000), emit("later", NOW + 1001)],
      NOW,
    );
    expect(immediate.map((e) => e.meta.id)).toEqual(["now", "past", "soon"]);
    expect(delayed.map((e) => e.meta.id)).toEqual(["later"]);
  });

  it("keeps what fits, refusing emits past 30 days and past the pending bound, counted", () => {
    const delayed = [
      emit("a", NOW + 5000, "self"),
      emit("far", NOW + DELAYED_EMIT_MAX_AHEAD_MS + 1),
      emit("b", NOW + 6000),
      emit("c", NOW + 7000),
    ];
    const plan = planDelayedEmits(delayed, DELAYED_EMITS_MAX_PENDING - 2, NOW, newId);
    expect(plan.inEvents.map((e) => [e.channel, e.meta])).toEqual([
      ["$in", { id: "a", delivery_ts: NOW + 5000, name: "self" }],
      ["$in", { id: "b", delivery_ts: NOW + 6000, name: "" }],
    ]);
    expect(plan.refusal).toEqual({
      name: "DelayedEmitError",
      message:
        "delayed emits were refused: 1 with a delivery_ts more than 30 days ahead, 1 past the 1000 delayed emits a source may have waiting; the others were scheduled",
      ts: NOW,
    });
  });

  it("schedules each stored $in event for its channel, its options without delivery_ts", () => {
    const stored = (id: string, channel: string, meta: StoredEvent["meta"]): StoredEvent => ({
      sourceId: "dc_1",
      id,
      indexedAtMs: NOW,
      channel,
      event: { x: id },
      emitId: "emit",
      meta,
    });
    expect(
      delayedEntriesOf([
        stored(`${NOW}-0`, "$in", { id: "a", name: "self", delivery_ts: NOW + 5000, hops: 1 }),
        stored(`${NOW}-1`, "$in", { id: "b", name: "", delivery_ts: NOW + 6000, summary: "s" }),
        stored(`${NOW}-2`, "$logs", { ts: NOW }),
      ]),
    ).toEqual([
      {
        sourceId: "dc_1",
        inEventId: `${NOW}-0`,
        dueMs: NOW + 5000,
        channel: "self",
        event: { x: `${NOW}-0` },
        meta: { id: "a", name: "self" },
      },
      {
        sourceId: "dc_1",
        inEventId: `${NOW}-1`,
        dueMs: NOW + 6000,
        channel: "",
        event: { x: `${NOW}-1` },
        meta: { id: "b", summary: "s" },
      },
    ]);
  });
});
