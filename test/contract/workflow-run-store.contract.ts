import { describe, expect, it } from "vitest";
import { formatId } from "#core/ids";
import { type PageQuery, slicePage } from "#core/pagination";
import type { WorkflowRunStore } from "#core/ports/workflow-run-store";
import type { WorkflowRun } from "#core/workflow-model";

const START_MS = 1_790_000_000_000;
let sequence = 0;
/** Distinct run ids that sort by creation, without randomness. */
function nextRunId(): string {
  sequence += 1;
  const random = new Uint8Array(12).map((_, i) => (sequence >> (i % 4)) + i);
  return formatId("run", START_MS + sequence, random);
}

/** A run as a runner begins it: no steps yet, a lease of a minute. */
function run(overrides: Partial<WorkflowRun> = {}): WorkflowRun {
  return {
    id: nextRunId(),
    workflowId: "p_orders",
    deploymentId: "d_one",
    trigger: { type: "http", id: "hi_orders" },
    status: "running",
    leaseUntilMs: START_MS + 60_000,
    attempts: 0,
    startedAt: START_MS,
    eventPreview: { body: { order: 1 }, nested: [null, "é✓"] },
    steps: [],
    logs: [],
    ...overrides,
  };
}

/** How `begun` ended: every optional field set, so an adapter that drops one fails. */
function ended(begun: WorkflowRun, status: WorkflowRun["status"] = "error"): WorkflowRun {
  return {
    ...begun,
    status,
    endedAt: begun.startedAt + 12,
    durationMs: 12,
    steps: [
      { id: "c_parse", namespace: "parse", status: "success", summary: "parsed", durationMs: 3, exportBytes: 10 },
      { id: "c_send", namespace: "send", status: "error", durationMs: 9, exportBytes: 0 },
    ],
    error: { code: "Error", cellId: "c_send", message: "boom" },
    exitReason: "none",
    logs: [{ ts: begun.startedAt + 1, level: "info", message: "hello", step: "parse" }],
  };
}

const byId = (r: WorkflowRun) => r.id;
const newestFirst = (all: WorkflowRun[]) => [...all].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));

export interface WorkflowRunStoreOptions {
  /** Removes runs past the store's retention as of `nowMs`, where the adapter does it on demand (locally). */
  sweep?: (store: WorkflowRunStore, nowMs: number) => Promise<unknown>;
}

/**
 * Behaviour every `WorkflowRunStore` adapter must have. `makeStore` returns an empty store, kept
 * `maxAgeMs` (0: forever).
 */
export function workflowRunStoreContract(
  makeStore: (retention?: { maxAgeMs: number }) => Promise<WorkflowRunStore>,
  options: WorkflowRunStoreOptions = {},
) {
  describe("WorkflowRunStore", () => {
    it("begins a new run once: started with attempts 1, then busy while its lease holds", async () => {
      const store = await makeStore();
      const first = run();
      const begun = await store.beginRun(first, START_MS);
      expect(begun).toStrictEqual({ outcome: "started", run: { ...first, attempts: 1 } });
      expect(await store.getRun(first.workflowId, first.id)).toStrictEqual({ ...first, attempts: 1 });

      // A repeated job (another runner, the same run id) while the first holds the lease.
      const again = await store.beginRun({ ...first, startedAt: START_MS + 5 }, START_MS + 5);
      expect(again).toStrictEqual({ outcome: "busy", leaseUntilMs: first.leaseUntilMs });
      // The lease holds up to its last millisecond.
      expect(await store.beginRun(first, first.leaseUntilMs)).toMatchObject({ outcome: "busy" });
      expect(await store.getRun(first.workflowId, first.id)).toStrictEqual({ ...first, attempts: 1 });
    });

    it("lets one of many concurrent begins of a run start it", async () => {
      const store = await makeStore();
      const first = run();
      const outcomes = await Promise.all(Array.from({ length: 5 }, () => store.beginRun(first, START_MS)));
      expect(outcomes.filter((o) => o.outcome === "started")).toHaveLength(1);
      expect(outcomes.filter((o) => o.outcome === "busy")).toHaveLength(4);
    });

    it("takes over a running run whose lease ended, with one more attempt", async () => {
      const store = await makeStore();
      const first = run();
      await store.beginRun(first, START_MS);
      const retry = { ...first, startedAt: first.leaseUntilMs + 1, leaseUntilMs: first.leaseUntilMs + 60_001 };
      expect(await store.beginRun(retry, first.leaseUntilMs + 1)).toStrictEqual({
        outcome: "started",
        run: { ...retry, attempts: 2 },
      });
      expect(await store.beginRun(retry, retry.leaseUntilMs + 1)).toMatchObject({
        outcome: "started",
        run: { attempts: 3 },
      });
    });

    it("records the end of a run, after which a begin of it is done and writes nothing", async () => {
      const store = await makeStore();
      const first = run();
      const { run: begun } = (await store.beginRun(first, START_MS)) as { run: WorkflowRun };
      const finished = ended(begun);
      await store.finishRun(finished);
      expect(await store.getRun(first.workflowId, first.id)).toStrictEqual(finished);
      // Done even past the lease: an ended run never runs again.
      expect(await store.beginRun(first, START_MS + 10 * 60_000)).toStrictEqual({ outcome: "done" });
      expect(await store.getRun(first.workflowId, first.id)).toStrictEqual(finished);
      for (const status of ["success", "exited"] as const) {
        const other = run();
        const { run: otherBegun } = (await store.beginRun(other, START_MS)) as { run: WorkflowRun };
        await store.finishRun(ended(otherBegun, status));
        expect(await store.beginRun(other, START_MS)).toStrictEqual({ outcome: "done" });
      }
    });

    it("keeps a run's record from an attempt that was taken over, and from a finish after its deletion", async () => {
      const store = await makeStore();
      const first = run();
      const { run: stale } = (await store.beginRun(first, START_MS)) as { run: WorkflowRun };
      const { run: current } = (await store.beginRun(first, first.leaseUntilMs + 1)) as { run: WorkflowRun };
      await store.finishRun(ended(stale, "success"));
      expect(await store.getRun(first.workflowId, first.id)).toStrictEqual(current);
      await store.finishRun(ended(current, "error"));
      // A second finish (the run ended already) changes nothing either.
      await store.finishRun(ended(current, "success"));
      expect(await store.getRun(first.workflowId, first.id)).toStrictEqual(ended(current, "error"));

      const orphan = run({ workflowId: "p_deleted" });
      const { run: orphanBegun } = (await store.beginRun(orphan, START_MS)) as { run: WorkflowRun };
      await store.deleteRuns("p_deleted");
      await store.finishRun(ended(orphanBegun));
      expect(await store.getRun("p_deleted", orphan.id)).toBeUndefined();
      expect(await store.listRuns("p_deleted", { limit: 10 })).toStrictEqual({ items: [], totalCount: 0 });
    });

    it("pages a workflow's runs newest first exactly like slicePage, apart from other workflows'", async () => {
      const store = await makeStore();
      const mine: WorkflowRun[] = [];
      for (let i = 0; i < 17; i++) {
        const workflowId = i % 3 === 0 ? "p_other" : "p_orders";
        const { run: begun } = (await store.beginRun(run({ workflowId }), START_MS)) as { run: WorkflowRun };
        const stored = i % 2 === 0 ? ended(begun, "success") : begun;
        if (stored !== begun) await store.finishRun(stored);
        if (workflowId === "p_orders") mine.push(stored);
      }
      const sorted = newestFirst(mine);
      const queries: PageQuery[] = [
        { limit: 10 },
        { limit: 100 },
        { limit: 1 },
        ...[...sorted.map(byId), "run_", "run_zzzzzzzzzzzzzzzzzzzzzz", `${sorted[4]!.id.slice(0, -1)}0`].flatMap(
          (cursor) => [
            { limit: 5, after: cursor },
            { limit: 5, before: cursor },
          ],
        ),
      ];
      for (const query of queries) {
        expect(await store.listRuns("p_orders", query), JSON.stringify(query)).toStrictEqual(
          slicePage(sorted, byId, query),
        );
      }
      expect((await store.listRuns("p_other", { limit: 100 })).totalCount).toBe(6);
      expect(await store.listRuns("p_none", { limit: 10 })).toStrictEqual({ items: [], totalCount: 0 });
    });

    it("deletes every run of one workflow, and a run begun again after is a new one", async () => {
      const store = await makeStore();
      const gone = Array.from({ length: 7 }, () => run({ workflowId: "p_gone" }));
      for (const r of gone) await store.beginRun(r, START_MS);
      const kept = run({ workflowId: "p_kept" });
      await store.beginRun(kept, START_MS);
      await store.deleteRuns("p_gone");
      expect(await store.listRuns("p_gone", { limit: 10 })).toStrictEqual({ items: [], totalCount: 0 });
      expect(await store.getRun("p_kept", kept.id)).toStrictEqual({ ...kept, attempts: 1 });
      await expect(store.deleteRuns("p_gone")).resolves.toBeUndefined();
      expect(await store.beginRun(gone[0]!, START_MS)).toMatchObject({ outcome: "started", run: { attempts: 1 } });
      expect((await store.listRuns("p_gone", { limit: 10 })).totalCount).toBe(1);
    });

    if (options.sweep) {
      const sweep = options.sweep;
      it("removes runs that started before the retention, counted out of the list", async () => {
        const maxAgeMs = 60_000;
        const store = await makeStore({ maxAgeMs });
        const old = run({ startedAt: START_MS });
        const recent = run({ startedAt: START_MS + 30_000 });
        await store.beginRun(old, START_MS);
        await store.beginRun(recent, START_MS);
        await sweep(store, START_MS + maxAgeMs + 1);
        expect(await store.listRuns("p_orders", { limit: 10 })).toStrictEqual({
          items: [{ ...recent, attempts: 1 }],
          totalCount: 1,
        });
      });
    }
  });
}
