import { describe, expect, it } from "vitest";
import { SEALED_SECRET } from "#core/component-model";
import { formatId, type ResourceKind } from "#core/ids";
import { type PageQuery, slicePage } from "#core/pagination";
import type { WorkflowStore } from "#core/ports/workflow-store";
import type { WorkflowRecord } from "#core/workflow-model";

let sequence = 0;
/** Distinct ids that sort by creation, without randomness. */
function nextId(kind: ResourceKind): string {
  sequence += 1;
  const random = new Uint8Array(12).map((_, i) => (sequence >> (i % 4)) + i);
  return formatId(kind, 1_790_000_000_000 + sequence, random);
}

/** A workflow with one step of each origin and a trigger of each type. */
function workflow(overrides: Partial<WorkflowRecord> = {}): WorkflowRecord {
  const id = overrides.id ?? nextId("workflow");
  return {
    id,
    userId: "u_ada",
    workspaceId: "o_ada",
    projectId: "proj_ada",
    name: "Orders",
    active: true,
    deploymentId: nextId("deployment"),
    steps: [
      {
        id: nextId("step"),
        namespace: "parse",
        disabled: false,
        origin: "code",
        componentId: "sc_code",
        configuredProps: {},
      },
      {
        id: nextId("step"),
        namespace: "send",
        disabled: true,
        origin: "registry",
        componentId: "sc_registry",
        configuredProps: {
          url: "https://example.com",
          token: { [SEALED_SECRET]: "ciphertext==" },
          nested: { list: [1, "two", null, true, { deep: "é✓" }], empty: "" },
        },
      },
    ],
    triggers: [
      {
        type: "http",
        id: nextId("httpTrigger"),
        key: `key-${id}`,
        customResponse: true,
        createdAt: 1_790_000_000_000,
        updatedAt: 1_790_000_000_000,
      },
      {
        type: "timer",
        id: nextId("timerTrigger"),
        spec: { cron: "0 9 * * 1", timezone: "Europe/Paris" },
        scheduleChangedAt: 1_790_000_000_000,
        createdAt: 1_790_000_000_000,
        updatedAt: 1_790_000_000_000,
      },
      { type: "source", sourceId: "dc_feed", subscriptionId: "sub_feed", deployedByWorkflow: false },
    ],
    createdAt: 1_790_000_000_000,
    updatedAt: 1_790_000_000_001,
    ...overrides,
  };
}

const httpKeys = (w: WorkflowRecord) => w.triggers.flatMap((t) => (t.type === "http" ? [t.key] : []));
const timersOf = (w: WorkflowRecord) =>
  w.triggers.flatMap((t) => (t.type === "timer" ? [{ workflowId: w.id, timerId: t.id, spec: t.spec }] : []));
const byId = (w: WorkflowRecord) => w.id;
const newestFirst = (all: WorkflowRecord[]) => [...all].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
const byTimerId = <T extends { timerId: string }>(all: T[]) =>
  [...all].sort((a, b) => (a.timerId < b.timerId ? -1 : 1));

/** Behaviour every `WorkflowStore` adapter must have. `makeStore` returns an empty store. */
export function workflowStoreContract(makeStore: () => Promise<WorkflowStore>) {
  describe("WorkflowStore", () => {
    it("reads back a created workflow exactly as written, by id, HTTP key, external id and in both lists", async () => {
      const store = await makeStore();
      const created = workflow({ externalId: "ci-orders", requestHash: "a".repeat(64) });
      await store.createWorkflow(created);
      expect(await store.getWorkflow(created.id)).toStrictEqual(created);
      expect(await store.findWorkflowByHttpKey(httpKeys(created)[0]!)).toStrictEqual(created);
      expect(await store.findWorkflowByExternalId("o_ada", "ci-orders")).toStrictEqual(created);
      expect(await store.listWorkflowsOfUser("u_ada", { limit: 10 })).toStrictEqual({
        items: [created],
        totalCount: 1,
      });
      expect(await store.listWorkflowsOfWorkspace("o_ada", { limit: 10 })).toStrictEqual({
        items: [created],
        totalCount: 1,
      });
      // The external id belongs to its workspace only, and another user's list is empty.
      expect(await store.findWorkflowByExternalId("o_bob", "ci-orders")).toBeUndefined();
      expect(await store.listWorkflowsOfUser("u_bob", { limit: 10 })).toStrictEqual({ items: [], totalCount: 0 });
      expect(await store.getWorkflow(nextId("workflow"))).toBeUndefined();
      expect(await store.findWorkflowByHttpKey("no-such-key")).toBeUndefined();
    });

    it("reads back a workflow without optional fields without inventing them", async () => {
      const store = await makeStore();
      const created = workflow({ triggers: [], steps: [] });
      await store.createWorkflow(created);
      expect(await store.getWorkflow(created.id)).toStrictEqual(created);
      expect(await store.listActiveTimerTriggers()).toEqual([]);
    });

    it("hands out copies: changing what a read returned changes nothing stored", async () => {
      const store = await makeStore();
      const created = workflow();
      await store.createWorkflow(created);
      // Read twice each way: an adapter that caches serves the second from its cache.
      const reads = [
        await store.getWorkflow(created.id),
        await store.getWorkflow(created.id),
        await store.findWorkflowByHttpKey(httpKeys(created)[0]!),
        await store.findWorkflowByHttpKey(httpKeys(created)[0]!),
      ];
      for (const read of reads) {
        read!.name = "Changed";
        read!.active = false;
      }
      expect(await store.getWorkflow(created.id)).toStrictEqual(created);
      expect(await store.findWorkflowByHttpKey(httpKeys(created)[0]!)).toStrictEqual(created);
    });

    it("serves what was written since from every lookup, however recently it was read", async () => {
      const store = await makeStore();
      const created = workflow({ externalId: "fresh" });
      await store.createWorkflow(created);
      const lookups = async () => [
        await store.getWorkflow(created.id),
        await store.findWorkflowByHttpKey(httpKeys(created)[0]!),
        await store.findWorkflowByExternalId("o_ada", "fresh"),
        (await store.listWorkflowsOfUser("u_ada", { limit: 1 })).items[0],
        (await store.listWorkflowsOfWorkspace("o_ada", { limit: 1 })).items[0],
      ];
      expect(await lookups()).toStrictEqual(Array(5).fill(created));
      const updated = { ...created, name: "Renamed", updatedAt: created.updatedAt + 1 };
      await store.updateWorkflow(updated);
      expect(await lookups()).toStrictEqual(Array(5).fill(updated));

      await store.getStepStates(created.id);
      await store.putStepStates(created.id, [{ stepId: "c_x", db: { n: 1 }, expectedVersion: 0 }]);
      expect(await store.getStepStates(created.id)).toEqual({ c_x: { db: { n: 1 }, version: 1 } });
      await store.deleteWorkflow(created.id);
      expect(await lookups()).toStrictEqual([undefined, undefined, undefined, undefined, undefined]);
      expect(await store.getStepStates(created.id)).toEqual({});
    });

    it("refuses a taken id, HTTP key or external id as a conflict without saving anything", async () => {
      const store = await makeStore();
      const first = workflow({ externalId: "one" });
      await store.createWorkflow(first);

      await expect(store.createWorkflow({ ...first, externalId: "other", triggers: [] })).rejects.toMatchObject({
        code: "conflict",
      });
      const sameKey = workflow({ triggers: [first.triggers[0]!] });
      await expect(store.createWorkflow(sameKey)).rejects.toMatchObject({ code: "conflict" });
      const sameExternalId = workflow({ externalId: "one" });
      await expect(store.createWorkflow(sameExternalId)).rejects.toMatchObject({ code: "conflict" });
      // Two HTTP triggers of one workflow with the same key.
      const twice = workflow();
      const doubled = { ...twice, triggers: [twice.triggers[0]!, twice.triggers[0]!] };
      await expect(store.createWorkflow(doubled)).rejects.toMatchObject({ code: "conflict" });

      for (const refused of [sameKey, sameExternalId, twice]) {
        expect(await store.getWorkflow(refused.id)).toBeUndefined();
        // The refused write left none of its timers or keys behind.
        for (const key of httpKeys(refused)) expect((await store.findWorkflowByHttpKey(key))?.id).not.toBe(refused.id);
      }
      expect(await store.listActiveTimerTriggers()).toStrictEqual(timersOf(first));
      expect(await store.getWorkflow(first.id)).toStrictEqual(first);
      expect((await store.listWorkflowsOfUser("u_ada", { limit: 10 })).totalCount).toBe(1);
      // The same external id in another workspace is another workflow's to take.
      await expect(
        store.createWorkflow(workflow({ workspaceId: "o_bob", externalId: "one" })),
      ).resolves.toBeUndefined();
    });

    it("updates a workflow, moving its HTTP keys, external id and timers with it", async () => {
      const store = await makeStore();
      const a = workflow({ externalId: "a" });
      await store.createWorkflow(a);
      const [http, timer] = a.triggers as [WorkflowRecord["triggers"][0], WorkflowRecord["triggers"][1]];
      const newTimerId = nextId("timerTrigger");
      const updated: WorkflowRecord = {
        ...a,
        name: "Orders 2",
        externalId: "a2",
        requestHash: "b".repeat(64),
        deploymentId: nextId("deployment"),
        steps: [a.steps[1]!],
        triggers: [
          { ...http, type: "http", key: "moved-key" } as WorkflowRecord["triggers"][0],
          { ...timer, type: "timer", id: newTimerId, spec: { intervalSeconds: 60 } } as WorkflowRecord["triggers"][1],
        ],
        updatedAt: a.updatedAt + 5,
      };
      await store.updateWorkflow(updated);
      expect(await store.getWorkflow(a.id)).toStrictEqual(updated);
      expect(await store.findWorkflowByHttpKey("moved-key")).toStrictEqual(updated);
      expect(await store.findWorkflowByHttpKey(httpKeys(a)[0]!)).toBeUndefined();
      expect(await store.findWorkflowByExternalId("o_ada", "a2")).toStrictEqual(updated);
      expect(await store.findWorkflowByExternalId("o_ada", "a")).toBeUndefined();
      expect(await store.listActiveTimerTriggers()).toStrictEqual([
        { workflowId: a.id, timerId: newTimerId, spec: { intervalSeconds: 60 } },
      ]);
      expect((await store.listWorkflowsOfUser("u_ada", { limit: 10 })).items).toStrictEqual([updated]);
      expect((await store.listWorkflowsOfWorkspace("o_ada", { limit: 10 })).items).toStrictEqual([updated]);

      // Freed: another workflow may take the old key and external id.
      await store.createWorkflow(workflow({ externalId: "a", triggers: [http] }));
      // Dropping the external id frees it too.
      const { externalId: _dropped, requestHash: _hash, ...withoutExternalId } = updated;
      await store.updateWorkflow(withoutExternalId);
      expect(await store.findWorkflowByExternalId("o_ada", "a2")).toBeUndefined();
      expect(await store.getWorkflow(a.id)).toStrictEqual(withoutExternalId);
    });

    it("refuses an update to another workflow's key or external id, and an update of a missing workflow", async () => {
      const store = await makeStore();
      const a = workflow({ externalId: "a" });
      const b = workflow({ externalId: "b" });
      await store.createWorkflow(a);
      await store.createWorkflow(b);
      await expect(store.updateWorkflow({ ...b, externalId: "a" })).rejects.toMatchObject({ code: "conflict" });
      await expect(store.updateWorkflow({ ...b, triggers: [a.triggers[0]!] })).rejects.toMatchObject({
        code: "conflict",
      });
      // Nothing of the refused updates was written: b keeps its keys, timers and external id.
      expect(await store.getWorkflow(b.id)).toStrictEqual(b);
      expect(await store.findWorkflowByHttpKey(httpKeys(b)[0]!)).toStrictEqual(b);
      expect(await store.findWorkflowByExternalId("o_ada", "b")).toStrictEqual(b);
      expect(await store.findWorkflowByHttpKey(httpKeys(a)[0]!)).toStrictEqual(a);
      expect(await store.listActiveTimerTriggers()).toStrictEqual(byTimerId([...timersOf(a), ...timersOf(b)]));

      await expect(store.updateWorkflow(workflow())).rejects.toMatchObject({ code: "not_found" });
    });

    it("applies concurrent updates one after the other: the keys and timers are the last record's, whole", async () => {
      const store = await makeStore();
      const a = workflow();
      await store.createWorkflow(a);
      const http = a.triggers[0]!;
      const versions = ["one", "two", "three"].map(
        (name): WorkflowRecord => ({
          ...a,
          name,
          triggers: [{ ...http, type: "http", key: `key-${name}` } as WorkflowRecord["triggers"][0]],
        }),
      );
      await Promise.all(versions.map((version) => store.updateWorkflow(version)));
      const stored = (await store.getWorkflow(a.id))!;
      expect(versions.map((v) => v.name)).toContain(stored.name);
      for (const version of versions) {
        const found = await store.findWorkflowByHttpKey(`key-${version.name}`);
        expect(found?.name).toBe(version.name === stored.name ? stored.name : undefined);
      }
      expect(await store.findWorkflowByHttpKey(httpKeys(a)[0]!)).toBeUndefined();
    });

    it("writes over the version the caller read only: of concurrent updates from one read, one wins, the others are conflicts", async () => {
      const store = await makeStore();
      const a = workflow();
      await store.createWorkflow(a);
      const versions = ["one", "two", "three"].map(
        (name, i): WorkflowRecord => ({ ...a, name, deploymentId: `d_${name}`, updatedAt: a.updatedAt + i + 1 }),
      );
      const outcomes = await Promise.allSettled(versions.map((version) => store.updateWorkflow(version, a)));
      expect(outcomes.filter((outcome) => outcome.status === "fulfilled")).toHaveLength(1);
      for (const outcome of outcomes) {
        if (outcome.status === "rejected") {
          expect(outcome.reason).toMatchObject({ code: "conflict", message: expect.stringContaining("meanwhile") });
        }
      }
      const stored = (await store.getWorkflow(a.id))!;
      const winner = versions[outcomes.findIndex((outcome) => outcome.status === "fulfilled")]!;
      expect(stored).toStrictEqual(winner);
      // Over the stored version it writes; over a missing workflow it is not found.
      await store.updateWorkflow({ ...stored, name: "four", updatedAt: stored.updatedAt + 10 }, stored);
      expect((await store.getWorkflow(a.id))?.name).toBe("four");
      await expect(store.updateWorkflow(workflow(), a)).rejects.toMatchObject({ code: "not_found" });
    });

    it("lists the timers of active workflows only, by timer id, and follows activation", async () => {
      const store = await makeStore();
      const a = workflow();
      const paused = workflow({ active: false });
      const c = workflow({
        triggers: [
          ...workflow().triggers.filter((t) => t.type === "timer"),
          {
            type: "timer",
            id: nextId("timerTrigger"),
            spec: { intervalSeconds: 30 },
            scheduleChangedAt: 0,
            createdAt: 0,
            updatedAt: 0,
          },
        ],
      });
      for (const w of [a, paused, c]) await store.createWorkflow(w);
      expect(await store.listActiveTimerTriggers()).toStrictEqual(byTimerId([...timersOf(a), ...timersOf(c)]));

      await store.updateWorkflow({ ...a, active: false });
      await store.updateWorkflow({ ...paused, active: true });
      expect(await store.listActiveTimerTriggers()).toStrictEqual(byTimerId([...timersOf(paused), ...timersOf(c)]));
      // An inactive workflow's HTTP key still finds it: the endpoint answers 404 itself.
      expect((await store.findWorkflowByHttpKey(httpKeys(a)[0]!))?.active).toBe(false);
    });

    it("pages a user's and a workspace's workflows newest first exactly like slicePage", async () => {
      const store = await makeStore();
      const mine: WorkflowRecord[] = [];
      const shared: WorkflowRecord[] = [];
      for (let i = 0; i < 23; i++) {
        const userId = i % 3 === 0 ? "u_bob" : "u_ada";
        const workspaceId = i % 2 === 0 ? "o_shared" : "o_other";
        const saved = workflow({ userId, workspaceId });
        await store.createWorkflow(saved);
        if (userId === "u_ada") mine.push(saved);
        if (workspaceId === "o_shared") shared.push(saved);
      }
      const queries = (sorted: WorkflowRecord[]): PageQuery[] => [
        { limit: 10 },
        { limit: 100 },
        { limit: 1 },
        ...[...sorted.map(byId), "p_", "p_zzzzzzzzzzzzzzzzzzzzzz", `${sorted[4]!.id.slice(0, -1)}0`].flatMap(
          (cursor) => [
            { limit: 5, after: cursor },
            { limit: 5, before: cursor },
          ],
        ),
      ];
      for (const [list, owner, items] of [
        ["user", "u_ada", newestFirst(mine)],
        ["workspace", "o_shared", newestFirst(shared)],
      ] as const) {
        for (const query of queries(items)) {
          const page =
            list === "user"
              ? await store.listWorkflowsOfUser(owner, query)
              : await store.listWorkflowsOfWorkspace(owner, query);
          expect(page, `${list} ${JSON.stringify(query)}`).toStrictEqual(slicePage(items, byId, query));
        }
      }
    });

    it("versions step states: writes are all or none, and a stale version is a conflict", async () => {
      const store = await makeStore();
      const id = nextId("workflow");
      expect(await store.getStepStates(id)).toEqual({});

      await store.putStepStates(id, [
        { stepId: "c_one", db: { count: 1 }, expectedVersion: 0 },
        { stepId: "c_two", db: { nested: { a: [null, ""] } }, expectedVersion: 0 },
      ]);
      expect(await store.getStepStates(id)).toEqual({
        c_one: { db: { count: 1 }, version: 1 },
        c_two: { db: { nested: { a: [null, ""] } }, version: 1 },
      });

      // c_one is current, c_two stale: nothing is written, c_one included.
      await expect(
        store.putStepStates(id, [
          { stepId: "c_one", db: { count: 2 }, expectedVersion: 1 },
          { stepId: "c_two", db: { lost: true }, expectedVersion: 0 },
        ]),
      ).rejects.toMatchObject({ code: "conflict" });
      await expect(store.putStepStates(id, [{ stepId: "c_new", db: {}, expectedVersion: 3 }])).rejects.toMatchObject({
        code: "conflict",
      });
      expect((await store.getStepStates(id)).c_one).toEqual({ db: { count: 1 }, version: 1 });

      // A write of one step leaves the other as it is.
      await store.putStepStates(id, [{ stepId: "c_one", db: { count: 2 }, expectedVersion: 1 }]);
      expect(await store.getStepStates(id)).toEqual({
        c_one: { db: { count: 2 }, version: 2 },
        c_two: { db: { nested: { a: [null, ""] } }, version: 1 },
      });
      // Another workflow's states are its own.
      expect(await store.getStepStates(nextId("workflow"))).toEqual({});
    });

    it("lets exactly one of two concurrent state writes on the same version win", async () => {
      const store = await makeStore();
      const id = nextId("workflow");
      await store.putStepStates(id, [{ stepId: "c_s", db: {}, expectedVersion: 0 }]);
      const results = await Promise.allSettled(
        ["one", "two"].map((writer) =>
          store.putStepStates(id, [{ stepId: "c_s", db: { writer }, expectedVersion: 1 }]),
        ),
      );
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      expect(results.find((r) => r.status === "rejected")).toMatchObject({ reason: { code: "conflict" } });
      const state = (await store.getStepStates(id)).c_s!;
      expect(state.version).toBe(2);
      expect(["one", "two"]).toContain(state.db.writer);
    });

    it("deletes a workflow with its keys, external id, timers, list entries and step states; deleting again succeeds", async () => {
      const store = await makeStore();
      const gone = workflow({ externalId: "gone" });
      const kept = workflow();
      await store.createWorkflow(gone);
      await store.createWorkflow(kept);
      await store.putStepStates(gone.id, [{ stepId: gone.steps[0]!.id, db: { x: 1 }, expectedVersion: 0 }]);
      await store.putStepStates(kept.id, [{ stepId: kept.steps[0]!.id, db: { y: 2 }, expectedVersion: 0 }]);

      await store.deleteWorkflow(gone.id);
      expect(await store.getWorkflow(gone.id)).toBeUndefined();
      expect(await store.findWorkflowByHttpKey(httpKeys(gone)[0]!)).toBeUndefined();
      expect(await store.findWorkflowByExternalId("o_ada", "gone")).toBeUndefined();
      expect(await store.getStepStates(gone.id)).toEqual({});
      expect(await store.listActiveTimerTriggers()).toStrictEqual(timersOf(kept));
      expect(await store.listWorkflowsOfUser("u_ada", { limit: 10 })).toStrictEqual({ items: [kept], totalCount: 1 });
      expect(await store.listWorkflowsOfWorkspace("o_ada", { limit: 10 })).toStrictEqual({
        items: [kept],
        totalCount: 1,
      });
      expect(await store.getStepStates(kept.id)).toEqual({ [kept.steps[0]!.id]: { db: { y: 2 }, version: 1 } });
      // Its key and external id are free again.
      await store.createWorkflow(workflow({ externalId: "gone", triggers: [gone.triggers[0]!] }));

      await expect(store.deleteWorkflow(gone.id)).resolves.toBeUndefined();
      await expect(store.deleteWorkflow(nextId("workflow"))).resolves.toBeUndefined();
      expect(await store.getWorkflow(kept.id)).toStrictEqual(kept);
    });
  });
}
