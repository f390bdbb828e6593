import { describe, expect, it } from "vitest";
import type { PausedRun, PausedRunStore } from "#core/ports/paused-runs";

const AT = 1_790_000_000_000;

/** A pause as a suspended run keeps it, with `extra` over it: the fixture of every store test. */
export const pausedRunFixture = (id: string, extra: Partial<PausedRun> = {}): PausedRun => ({
  id,
  tokenHash: "ab".repeat(32),
  workflowId: "p_a",
  stepsKey: "k_1",
  stateBytes: 100,
  originRunId: id,
  trigger: { type: "http", id: "hi_1" },
  kind: "suspend",
  stepId: "c_ask",
  stepNamespace: "ask",
  createdAt: AT,
  dueMs: AT + 60_000,
  runs: 1,
  state: { event: { body: { order: 7 } }, steps: { ask: { $return_value: "asked", list: [1, "two", null] } } },
  ...extra,
});

/** The behaviour every `PausedRunStore` adapter has; `make` gives an empty store each time. */
export function pausedRunStoreContract(make: () => Promise<PausedRunStore>) {
  describe("PausedRunStore contract", () => {
    it("keeps pauses whole, counts them per workflow, and forgets one (twice is fine)", async () => {
      const store = await make();
      const rerun = pausedRunFixture("run_b", {
        kind: "rerun",
        runs: 3,
        hops: 2,
        state: { event: null, steps: {}, context: { jobId: "j_1" } },
      });
      await store.add(pausedRunFixture("run_a"));
      await store.add(rerun);
      await store.add(pausedRunFixture("run_c", { workflowId: "p_b" }));
      expect(await store.get("run_a")).toEqual(pausedRunFixture("run_a"));
      expect(await store.get("run_b")).toEqual(rerun);
      expect(await store.get("run_x")).toBeUndefined();
      expect(await store.countPending("p_a")).toBe(2);
      expect(await store.countPending("p_b")).toBe(1);
      expect(await store.countPending("p_z")).toBe(0);
      expect(await store.remove("run_a")).toBe(true);
      // Removed already: false, so only one of two removals at once takes its bytes back.
      expect(await store.remove("run_a")).toBe(false);
      expect(await store.get("run_a")).toBeUndefined();
      expect(await store.countPending("p_a")).toBe(1);
    });

    it("lets the first dispatch win; later ones get the stored winner and change nothing", async () => {
      const store = await make();
      await store.add(pausedRunFixture("run_a"));
      const request = { method: "POST", body: { approved: true } };
      const first = await store.dispatch("run_a", { how: "resume", atMs: AT + 5, request });
      expect(first).toEqual({
        pause: { ...pausedRunFixture("run_a"), dispatch: { how: "resume", atMs: AT + 5, request } },
        won: true,
      });
      const second = await store.dispatch("run_a", { how: "due", atMs: AT + 60_000 });
      expect(second).toEqual({ pause: first?.pause, won: false });
      expect(await store.get("run_a")).toEqual(first?.pause);
      expect(await store.dispatch("run_x", { how: "cancel", atMs: AT })).toBeUndefined();
    });

    it("lets exactly one of many concurrent dispatches win", async () => {
      const store = await make();
      await store.add(pausedRunFixture("run_a"));
      const tries = await Promise.all(
        Array.from({ length: 8 }, (_, index) =>
          store.dispatch("run_a", { how: index % 2 === 0 ? "resume" : "cancel", atMs: AT + index }),
        ),
      );
      expect(tries.filter((taken) => taken?.won)).toHaveLength(1);
      const winner = tries.find((taken) => taken?.won)?.pause.dispatch;
      for (const taken of tries) expect(taken?.pause.dispatch).toEqual(winner);
    });

    it("pausing again under the same id replaces the pause, and its dispatch", async () => {
      const store = await make();
      await store.add(pausedRunFixture("run_a"));
      await store.dispatch("run_a", { how: "cancel", atMs: AT + 1 });
      const again = pausedRunFixture("run_a", { tokenHash: "cd".repeat(32), dueMs: AT + 120_000 });
      await store.add(again);
      expect(await store.get("run_a")).toEqual(again);
      expect(await store.countPending("p_a")).toBe(1);
    });

    it("adds up what a workflow's pauses keep, as they come and go", async () => {
      const store = await make();
      expect(await store.stateBytesOf("p_a")).toBe(0);
      await store.add(pausedRunFixture("run_a", { stateBytes: 1000 }));
      await store.add(pausedRunFixture("run_b", { stateBytes: 250 }));
      await store.add(pausedRunFixture("run_c", { workflowId: "p_b", stateBytes: 7 }));
      expect(await store.stateBytesOf("p_a")).toBe(1250);
      // Paused again under the same id: the new size replaces the old.
      await store.add(pausedRunFixture("run_b", { stateBytes: 50 }));
      expect(await store.stateBytesOf("p_a")).toBe(1050);
      await store.remove("run_a");
      expect(await store.stateBytesOf("p_a")).toBe(50);
      expect(await store.stateBytesOf("p_b")).toBe(7);
    });

    it("keeps a touched pause as it was: its dispatch stays", async () => {
      const store = await make();
      await store.add(pausedRunFixture("run_a"));
      const taken = await store.dispatch("run_a", { how: "resume", atMs: AT + 1 });
      await store.touch("run_a", AT + 600_000);
      await store.touch("run_none", AT);
      expect(await store.get("run_a")).toEqual(taken?.pause);
    });

    it("forgets every pause of a deleted workflow, saying which", async () => {
      const store = await make();
      await store.add(pausedRunFixture("run_a"));
      await store.add(pausedRunFixture("run_b"));
      await store.add(pausedRunFixture("run_c", { workflowId: "p_b" }));
      await store.dispatch("run_b", { how: "resume", atMs: AT });
      expect((await store.removeWorkflow("p_a")).sort()).toEqual(["run_a", "run_b"]);
      expect(await store.countPending("p_a")).toBe(0);
      expect(await store.get("run_c")).toEqual(pausedRunFixture("run_c", { workflowId: "p_b" }));
      expect(await store.removeWorkflow("p_a")).toEqual([]);
    });
  });
}
