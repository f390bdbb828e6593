import { describe, expect, it } from "vitest";
import type { UsageStore } from "#core/ports/usage-store";

/** Behaviour every `UsageStore` adapter must have. `makeStore` returns an empty store. */
export function usageStoreContract(makeStore: () => Promise<UsageStore>) {
  describe("UsageStore", () => {
    it("reports zeros for an owner and day with nothing counted", async () => {
      const store = await makeStore();
      expect(await store.getUsage("u_nobody", "2026-11-20")).toEqual({ invocations: 0, computeTimeMs: 0, credits: 0 });
    });

    it("adds up counters per owner and per day, without mixing them", async () => {
      const store = await makeStore();
      await store.addUsage("u_one", "2026-11-20", { invocations: 2, computeTimeMs: 150 });
      await store.addUsage("u_one", "2026-11-20", { invocations: 1, credits: 3 });
      await store.addUsage("u_one", "2026-11-21", { invocations: 7 });
      await store.addUsage("u_two", "2026-11-20", { computeTimeMs: 9 });

      expect(await store.getUsage("u_one", "2026-11-20")).toEqual({ invocations: 3, computeTimeMs: 150, credits: 3 });
      expect(await store.getUsage("u_one", "2026-11-21")).toEqual({ invocations: 7, computeTimeMs: 0, credits: 0 });
      expect(await store.getUsage("u_two", "2026-11-20")).toEqual({ invocations: 0, computeTimeMs: 9, credits: 0 });
    });

    it("loses no increment when many are added at once", async () => {
      const store = await makeStore();
      await Promise.all(Array.from({ length: 25 }, () => store.addUsage("u_busy", "2026-11-20", { invocations: 1 })));
      expect((await store.getUsage("u_busy", "2026-11-20")).invocations).toBe(25);
    });

    it("adds up what each workspace stored, across its sources and calls, and takes back negative amounts", async () => {
      const store = await makeStore();
      expect(await store.getStored("o_empty")).toEqual({ events: 0, bytes: 0 });
      await Promise.all([
        store.addStored("o_one", "dc_a", NOW, { events: 3, bytes: 300 }),
        store.addStored("o_one", "dc_b", NOW, { events: 1, bytes: 50 }),
        store.addStored("o_two", "dc_c", NOW, { events: 7, bytes: 700 }),
      ]);
      await store.addStored("o_one", "dc_a", NOW, { events: -1, bytes: -100 });
      expect(await store.getStored("o_one")).toEqual({ events: 3, bytes: 250 });
      expect(await store.getStored("o_two")).toEqual({ events: 7, bytes: 700 });
    });

    it("counts in windows: 1 for the first call of a key and window, one more per call, apart per key and window", async () => {
      const store = await makeStore();
      const counts = await Promise.all(Array.from({ length: 5 }, () => store.countInWindow("runs:o_one", NOW, 60_000)));
      // Atomic: each concurrent call sees its own count, exactly one of them 1.
      expect([...counts].sort()).toEqual([1, 2, 3, 4, 5]);
      expect(await store.countInWindow("runs:o_two", NOW, 60_000)).toBe(1);
      expect(await store.countInWindow("runs:o_one", NOW + 60_000, 60_000)).toBe(1);
      expect(await store.countInWindow("runs:o_one", NOW, 60_000)).toBe(6);
    });
  });
}

/** A time inside every adapter's retention (the stores keep what they count for 30 days by default). */
const NOW = Date.now();
