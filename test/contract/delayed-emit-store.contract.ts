import { describe, expect, it } from "vitest";
import type { DelayedEmit, DelayedEmitStore } from "#core/ports/delayed-emits";

const DUE = 1_790_000_000_000;

const entry = (sourceId: string, inEventId: string, extra: Partial<DelayedEmit> = {}): DelayedEmit => ({
  sourceId,
  inEventId,
  dueMs: DUE,
  channel: "self",
  event: { inEventId, nested: { list: [1, "two", null] } },
  meta: { id: `task-${inEventId}`, summary: "a task" },
  ...extra,
});

/** The behaviour every `DelayedEmitStore` adapter's rows have; `make` gives an empty store each time. */
export function delayedEmitStoreContract(make: () => Promise<DelayedEmitStore>) {
  describe("DelayedEmitStore contract", () => {
    it("keeps entries per source, reads one back whole, and forgets a delivered one", async () => {
      const store = await make();
      await store.add([entry("dc_a", "100-0"), entry("dc_a", "100-1", { channel: "", event: null, meta: {} })]);
      await store.add([entry("dc_b", "100-0", { dueMs: DUE + 5 })]);
      expect(await store.countPending("dc_a")).toBe(2);
      expect(await store.countPending("dc_b")).toBe(1);
      expect(await store.countPending("dc_c")).toBe(0);
      expect(await store.get("dc_a", "100-0")).toEqual(entry("dc_a", "100-0"));
      expect(await store.get("dc_a", "100-1")).toEqual(entry("dc_a", "100-1", { channel: "", event: null, meta: {} }));
      expect(await store.get("dc_b", "100-0")).toEqual(entry("dc_b", "100-0", { dueMs: DUE + 5 }));
      expect(await store.get("dc_b", "100-1")).toBeUndefined();
      await store.remove("dc_a", "100-0");
      await store.remove("dc_a", "100-0");
      expect(await store.get("dc_a", "100-0")).toBeUndefined();
      expect(await store.countPending("dc_a")).toBe(1);
      expect(await store.countPending("dc_b")).toBe(1);
    });

    it("cancels a range of $in ids in numeric order, and every entry of a source, saying which it forgot", async () => {
      const store = await make();
      // 9-x < 10-x numerically, though not as text.
      await store.add(["9-5", "10-0", "10-1", "11-0", "100-0"].map((id) => entry("dc_a", id)));
      await store.add([entry("dc_b", "10-0")]);
      expect((await store.removeRange("dc_a", "9-6", "10-1")).sort()).toEqual(["10-0", "10-1"]);
      expect(await store.get("dc_a", "10-0")).toBeUndefined();
      expect(await store.get("dc_a", "9-5")).toBeDefined();
      expect(await store.removeRange("dc_a", "11-0", "11-0")).toEqual(["11-0"]);
      expect(await store.removeRange("dc_a", "12-0", "99-0")).toEqual([]);
      expect(await store.countPending("dc_a")).toBe(2);
      expect((await store.removeRange("dc_a")).sort()).toEqual(["100-0", "9-5"]);
      expect(await store.countPending("dc_a")).toBe(0);
      expect(await store.get("dc_b", "10-0")).toEqual(entry("dc_b", "10-0"));
    });

    it("counts many waiting entries of a source exactly", async () => {
      const store = await make();
      const many = Array.from({ length: 250 }, (_, n) => entry("dc_a", `${DUE}-${n}`, { event: "x".repeat(200) }));
      await store.add(many);
      expect(await store.countPending("dc_a")).toBe(250);
      expect(await store.removeRange("dc_a", `${DUE}-10`, `${DUE}-19`)).toHaveLength(10);
      expect(await store.countPending("dc_a")).toBe(240);
    });
  });
}
