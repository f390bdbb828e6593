import { describe, expect, it } from "vitest";
import type { UsageStore } from "#ports/usage-store";

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
  });
}
