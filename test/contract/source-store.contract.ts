import { describe, expect, it } from "vitest";
import { SEALED_SECRET, type SourceRecord } from "#core/component-model";
import { formatId } from "#core/ids";
import { type PageQuery, slicePage } from "#core/pagination";
import type { DeployClaim, SourceStore } from "#core/ports/source-store";

let sequence = 0;
/** Distinct source ids that sort by creation, without randomness. */
function nextSourceId(): string {
  sequence += 1;
  const random = new Uint8Array(12).map((_, i) => (sequence >> (i % 4)) + i);
  return formatId("source", 1_790_000_000_000 + sequence, random);
}

function source(overrides: Partial<SourceRecord> = {}): SourceRecord {
  const id = overrides.id ?? nextSourceId();
  return {
    id,
    userId: "u_ada",
    workspaceId: "o_ada",
    componentId: "sc_component",
    name: "My source",
    nameSlug: "my-source",
    configuredProps: {
      http: {},
      token: { [SEALED_SECRET]: "ciphertext==" },
      nested: { list: [1, "two", null, true, { deep: "é✓" }], empty: "" },
    },
    active: true,
    endpointKey: `endpoint-${id}`,
    createdAt: 1_790_000_000_000,
    updatedAt: 1_790_000_000_001,
    ...overrides,
  };
}

const byId = (s: SourceRecord) => s.id;

const HOUR = 3_600_000;

function claimOf(sourceId: string, overrides: Partial<DeployClaim> = {}): DeployClaim {
  return {
    userId: "u_ada",
    key: "retry-me 1",
    requestHash: "hash-a",
    sourceId,
    createdAt: 1_790_000_000_000,
    expiresAt: 1_790_000_000_000 + 24 * HOUR,
    ...overrides,
  };
}
const newestFirst = (sources: SourceRecord[]) => [...sources].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));

/** Behaviour every `SourceStore` adapter must have. `makeStore` returns an empty store. */
export function sourceStoreContract(makeStore: () => Promise<SourceStore>) {
  describe("SourceStore", () => {
    it("reads back a created source exactly as written, by id and by endpoint key", async () => {
      const store = await makeStore();
      // Every optional field set, so an adapter that drops one fails here.
      const created = source({
        timer: { cron: "*/5 * * * *", timezone: "Europe/Paris" },
        propDefinitions: [
          { name: "kind", type: "string", options: ["a", { label: "B", value: "b" }] },
          { name: "count", type: "integer", min: 1, optional: true, default: 2 },
        ],
        workflowId: "p_deployedMe",
      });
      expect(await store.createSource(created)).toStrictEqual(created);
      expect(await store.getSource(created.id)).toStrictEqual(created);
      expect(await store.findSourceByEndpointKey(created.endpointKey!)).toStrictEqual(created);
      expect((await store.listSourcesOfUser(created.userId, { limit: 10 })).items).toStrictEqual([created]);
      expect((await store.listSourcesOfWorkspace(created.workspaceId, { limit: 10 })).items).toStrictEqual([created]);
      const { propDefinitions: _dropped, ...withoutDefinitions } = created;
      expect(await store.updateSource(withoutDefinitions)).toStrictEqual(withoutDefinitions);
      expect(await store.getSource(created.id)).toStrictEqual(withoutDefinitions);
    });

    it("reads back a source without endpoint key or timer without inventing those fields", async () => {
      const store = await makeStore();
      const { endpointKey: _key, ...created } = source();
      await store.createSource(created);
      expect(await store.getSource(created.id)).toStrictEqual(created);
    });

    it("gives sources of one user with the same slug the counters 1, 2, ... and another user the plain slug", async () => {
      const store = await makeStore();
      const slugs: string[] = [];
      for (let i = 0; i < 3; i++) slugs.push((await store.createSource(source({ nameSlug: "ticker" }))).nameSlug);
      expect(slugs).toEqual(["ticker", "ticker-1", "ticker-2"]);

      const others = await store.createSource(source({ userId: "u_bob", workspaceId: "o_bob", nameSlug: "ticker" }));
      expect(others.nameSlug).toBe("ticker");
      // Slugs that merely start with the wanted one do not count.
      const similar = await store.createSource(source({ userId: "u_carl", nameSlug: "ticker-extra" }));
      expect((await store.createSource(source({ userId: "u_carl", nameSlug: "ticker" }))).nameSlug).toBe("ticker");
      expect(similar.nameSlug).toBe("ticker-extra");
    });

    it("stores the slug it returns, and reuses the lowest counter freed by a deletion", async () => {
      const store = await makeStore();
      const first = await store.createSource(source({ nameSlug: "feed" }));
      const second = await store.createSource(source({ nameSlug: "feed" }));
      await store.createSource(source({ nameSlug: "feed" }));
      expect((await store.getSource(second.id))?.nameSlug).toBe("feed-1");

      await store.deleteSource(second.id);
      expect((await store.createSource(source({ nameSlug: "feed" }))).nameSlug).toBe("feed-1");
      await store.deleteSource(first.id);
      expect((await store.createSource(source({ nameSlug: "feed" }))).nameSlug).toBe("feed");
    });

    it("gives concurrent creations with the same slug distinct slugs", async () => {
      const store = await makeStore();
      const created = await Promise.all(
        Array.from({ length: 5 }, () => store.createSource(source({ nameSlug: "race" }))),
      );
      expect(created.map((s) => s.nameSlug).sort()).toEqual(["race", "race-1", "race-2", "race-3", "race-4"]);
      for (const saved of created) expect((await store.getSource(saved.id))?.nameSlug).toBe(saved.nameSlug);
    });

    it("re-reserves the slug on rename and frees the old one", async () => {
      const store = await makeStore();
      const a = await store.createSource(source({ nameSlug: "alpha" }));
      const renamed = await store.updateSource({ ...a, name: "Beta", nameSlug: "beta", updatedAt: a.updatedAt + 1 });
      expect(renamed.nameSlug).toBe("beta");
      expect(await store.getSource(a.id)).toStrictEqual(renamed);
      // "alpha" is free again, "beta" is taken.
      expect((await store.createSource(source({ nameSlug: "alpha" }))).nameSlug).toBe("alpha");
      expect((await store.createSource(source({ nameSlug: "beta" }))).nameSlug).toBe("beta-1");
    });

    it("renames to a taken slug with a counter, and keeps a source's own slug when it does not change", async () => {
      const store = await makeStore();
      await store.createSource(source({ nameSlug: "gamma" }));
      const b = await store.createSource(source({ nameSlug: "delta" }));
      const renamed = await store.updateSource({ ...b, nameSlug: "gamma" });
      expect(renamed.nameSlug).toBe("gamma-1");
      // Unchanged slug: kept, not treated as taken by the source itself, and still reserved.
      expect((await store.updateSource({ ...renamed, active: false })).nameSlug).toBe("gamma-1");
      expect((await store.createSource(source({ nameSlug: "gamma" }))).nameSlug).toBe("gamma-2");
      // Asking again for the plain slug while others have it and gamma-1 lands on its own counter.
      expect((await store.updateSource({ ...renamed, nameSlug: "gamma" })).nameSlug).toBe("gamma-1");
      expect((await store.createSource(source({ nameSlug: "gamma" }))).nameSlug).toBe("gamma-3");
      expect((await store.createSource(source({ nameSlug: "delta" }))).nameSlug).toBe("delta");
    });

    it("answers not_found when updating a source that does not exist", async () => {
      const store = await makeStore();
      await expect(store.updateSource(source())).rejects.toMatchObject({ code: "not_found" });
    });

    it("refuses an existing id or endpoint key as a conflict without saving anything", async () => {
      const store = await makeStore();
      const first = await store.createSource(source({ nameSlug: "one" }));
      await expect(store.createSource({ ...first, nameSlug: "other", endpointKey: "fresh-key" })).rejects.toMatchObject(
        {
          code: "conflict",
        },
      );
      const clash = source({ nameSlug: "two", endpointKey: first.endpointKey });
      await expect(store.createSource(clash)).rejects.toMatchObject({ code: "conflict" });
      expect(await store.getSource(clash.id)).toBeUndefined();
      expect((await store.createSource(source({ nameSlug: "two" }))).nameSlug).toBe("two");
      expect(await store.findSourceByEndpointKey("fresh-key")).toBeUndefined();
      expect(await store.findSourceByEndpointKey(first.endpointKey!)).toStrictEqual(first);
    });

    it("moves the endpoint key on update and refuses another source's key", async () => {
      const store = await makeStore();
      const a = await store.createSource(source({ nameSlug: "a" }));
      const b = await store.createSource(source({ nameSlug: "b" }));
      const moved = await store.updateSource({ ...a, endpointKey: "new-key" });
      expect(await store.findSourceByEndpointKey("new-key")).toStrictEqual(moved);
      expect(await store.findSourceByEndpointKey(a.endpointKey!)).toBeUndefined();

      await expect(store.updateSource({ ...b, endpointKey: "new-key" })).rejects.toMatchObject({ code: "conflict" });
      expect(await store.getSource(b.id)).toStrictEqual(b);
      expect(await store.findSourceByEndpointKey(b.endpointKey!)).toStrictEqual(b);

      const { endpointKey: _key, ...withoutKey } = moved;
      await store.updateSource(withoutKey);
      expect(await store.findSourceByEndpointKey("new-key")).toBeUndefined();
      expect(await store.getSource(a.id)).toStrictEqual(withoutKey);
    });

    it("keeps the copies served by every lookup in step with updates", async () => {
      const store = await makeStore();
      const a = await store.createSource(source({ nameSlug: "copy", timer: { intervalSeconds: 60 } }));
      const updated = await store.updateSource({
        ...a,
        name: "Copy 2",
        configuredProps: { changed: true },
        timer: { intervalSeconds: 30 },
        updatedAt: a.updatedAt + 5,
      });
      expect(await store.getSource(a.id)).toStrictEqual(updated);
      expect(await store.findSourceByEndpointKey(a.endpointKey!)).toStrictEqual(updated);
      expect((await store.listSourcesOfUser(a.userId, { limit: 10 })).items).toStrictEqual([updated]);
      expect((await store.listSourcesOfWorkspace(a.workspaceId, { limit: 10 })).items).toStrictEqual([updated]);
      expect(await store.listActiveTimerSources()).toStrictEqual([updated]);
    });

    it("pages a user's and a workspace's sources newest first exactly like slicePage", async () => {
      const store = await makeStore();
      const mine: SourceRecord[] = [];
      const workspace: SourceRecord[] = [];
      for (let i = 0; i < 23; i++) {
        const userId = i % 3 === 0 ? "u_bob" : "u_ada";
        const workspaceId = i % 2 === 0 ? "o_shared" : "o_other";
        const saved = await store.createSource(source({ userId, workspaceId, nameSlug: "paged" }));
        if (userId === "u_ada") mine.push(saved);
        if (workspaceId === "o_shared") workspace.push(saved);
      }
      const sortedMine = newestFirst(mine);
      const sortedWorkspace = newestFirst(workspace);
      const cursors = (sorted: SourceRecord[]) => [
        ...sorted.map(byId),
        // Positions that are no source's id: before the first, after the last, between two.
        "dc_",
        "dc_zzzzzzzzzzzzzzzzzzzzzz",
        `${sorted[4]!.id.slice(0, -1)}0`,
      ];
      const queries = (sorted: SourceRecord[]): PageQuery[] => [
        { limit: 10 },
        { limit: 100 },
        { limit: 1 },
        ...cursors(sorted).flatMap((cursor) => [
          { limit: 5, after: cursor },
          { limit: 5, before: cursor },
        ]),
      ];
      for (const query of queries(sortedMine)) {
        expect(await store.listSourcesOfUser("u_ada", query), JSON.stringify(query)).toStrictEqual(
          slicePage(sortedMine, byId, query),
        );
      }
      for (const query of queries(sortedWorkspace)) {
        expect(await store.listSourcesOfWorkspace("o_shared", query), JSON.stringify(query)).toStrictEqual(
          slicePage(sortedWorkspace, byId, query),
        );
      }
      expect(await store.listSourcesOfUser("u_nobody", { limit: 10 })).toEqual({ items: [], totalCount: 0 });
    });

    it("walks every page with end cursors and finds each source exactly once", async () => {
      const store = await makeStore();
      const all: SourceRecord[] = [];
      for (let i = 0; i < 12; i++) all.push(await store.createSource(source({ nameSlug: "walk" })));
      const seen: string[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await store.listSourcesOfUser("u_ada", after === undefined ? { limit: 5 } : { limit: 5, after });
        expect(page.totalCount).toBe(12);
        if (page.items.length === 0) break;
        seen.push(...page.items.map(byId));
        after = page.items[page.items.length - 1]!.id;
      }
      expect(seen).toEqual(newestFirst(all).map(byId));
    });

    it("lists exactly the active sources with a timer, oldest first", async () => {
      const store = await makeStore();
      const timer = { intervalSeconds: 900 };
      const a = await store.createSource(source({ nameSlug: "a", timer }));
      await store.createSource(source({ nameSlug: "b", timer, active: false }));
      await store.createSource(source({ nameSlug: "c" }));
      const d = await store.createSource(source({ nameSlug: "d", timer: { cron: "0 * * * *" } }));
      expect(await store.listActiveTimerSources()).toStrictEqual([a, d]);

      const paused = await store.updateSource({ ...a, active: false });
      expect(await store.listActiveTimerSources()).toStrictEqual([d]);
      const resumed = await store.updateSource({ ...paused, active: true });
      expect(await store.listActiveTimerSources()).toStrictEqual([resumed, d]);
      const { timer: _timer, ...noTimer } = d;
      await store.updateSource(noTimer);
      expect(await store.listActiveTimerSources()).toStrictEqual([resumed]);
      await store.deleteSource(a.id);
      expect(await store.listActiveTimerSources()).toEqual([]);
    });

    it("versions the state: a write based on a stale version is a conflict and changes nothing", async () => {
      const store = await makeStore();
      const id = nextSourceId();
      expect(await store.getSourceState(id)).toEqual({ db: {}, dedupe: {}, version: 0 });

      await store.putSourceState(id, { db: { count: 1 }, dedupe: { unique: ["a"] } }, 0);
      expect(await store.getSourceState(id)).toEqual({ db: { count: 1 }, dedupe: { unique: ["a"] }, version: 1 });
      await expect(store.putSourceState(id, { db: { count: 99 }, dedupe: {} }, 0)).rejects.toMatchObject({
        code: "conflict",
      });

      await store.putSourceState(id, { db: { count: 2, nested: { a: [null, ""] } }, dedupe: { greatest: 7 } }, 1);
      await expect(store.putSourceState(id, { db: {}, dedupe: {} }, 1)).rejects.toMatchObject({ code: "conflict" });
      await expect(store.putSourceState(id, { db: {}, dedupe: {} }, 5)).rejects.toMatchObject({ code: "conflict" });
      expect(await store.getSourceState(id)).toEqual({
        db: { count: 2, nested: { a: [null, ""] } },
        dedupe: { greatest: 7 },
        version: 2,
      });
    });

    it("lets exactly one of two concurrent state writes on the same version win", async () => {
      const store = await makeStore();
      const id = nextSourceId();
      await store.putSourceState(id, { db: {}, dedupe: {} }, 0);
      const results = await Promise.allSettled([
        store.putSourceState(id, { db: { writer: "one" }, dedupe: {} }, 1),
        store.putSourceState(id, { db: { writer: "two" }, dedupe: {} }, 1),
      ]);
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      expect(results.find((r) => r.status === "rejected")).toMatchObject({ reason: { code: "conflict" } });
      const state = await store.getSourceState(id);
      expect(state.version).toBe(2);
      expect(["one", "two"]).toContain(state.db.writer);
    });

    it("deletes a source with its slug, endpoint key, list entries and state, and deleting again succeeds", async () => {
      const store = await makeStore();
      const a = await store.createSource(source({ nameSlug: "gone", timer: { intervalSeconds: 60 } }));
      const kept = await store.createSource(source({ nameSlug: "kept" }));
      await store.putSourceState(a.id, { db: { x: 1 }, dedupe: {} }, 0);

      await store.deleteSource(a.id);
      expect(await store.getSource(a.id)).toBeUndefined();
      expect(await store.findSourceByEndpointKey(a.endpointKey!)).toBeUndefined();
      expect(await store.getSourceState(a.id)).toEqual({ db: {}, dedupe: {}, version: 0 });
      expect(await store.listSourcesOfUser(a.userId, { limit: 10 })).toStrictEqual({ items: [kept], totalCount: 1 });
      expect(await store.listSourcesOfWorkspace(a.workspaceId, { limit: 10 })).toStrictEqual({
        items: [kept],
        totalCount: 1,
      });
      expect(await store.listActiveTimerSources()).toEqual([]);
      expect((await store.createSource(source({ nameSlug: "gone" }))).nameSlug).toBe("gone");
      expect((await store.createSource(source({ endpointKey: a.endpointKey, nameSlug: "x" }))).endpointKey).toBe(
        a.endpointKey,
      );

      await expect(store.deleteSource(a.id)).resolves.toBeUndefined();
      await expect(store.deleteSource(nextSourceId())).resolves.toBeUndefined();
      expect(await store.getSource(kept.id)).toStrictEqual(kept);
    });
    it("keeps a deploy's mark on every copy, lists marked sources by start time, and clears it on update", async () => {
      const store = await makeStore();
      const early = await store.createSource(source({ deployingSince: 1_000, timer: { intervalSeconds: 60 } }));
      const late = await store.createSource(source({ deployingSince: 5_000 }));
      const done = await store.createSource(source());
      expect(await store.getSource(early.id)).toStrictEqual(early);
      expect(await store.findSourceByEndpointKey(early.endpointKey!)).toStrictEqual(early);
      expect((await store.listSourcesOfUser("u_ada", { limit: 10 })).items.map(byId)).toContain(early.id);

      expect((await store.listDeployingSources(1_000)).map(byId)).toEqual([]);
      expect(await store.listDeployingSources(1_001)).toStrictEqual([early]);
      expect((await store.listDeployingSources(10_000)).map(byId).sort()).toEqual([early.id, late.id].sort());

      const { deployingSince: _cleared, ...finished } = early;
      expect(await store.updateSource(finished)).toStrictEqual(finished);
      expect(await store.getSource(early.id)).toStrictEqual(finished);
      expect(await store.listDeployingSources(10_000)).toStrictEqual([late]);
      await store.deleteSource(late.id);
      expect(await store.listDeployingSources(10_000)).toEqual([]);
      expect(await store.getSource(done.id)).toStrictEqual(done);
    });

    it("keeps a background deploy's step and a failure's reason on every copy, and lists them while marked", async () => {
      const store = await makeStore();
      const handed = await store.createSource(source({ deployingSince: 1_000, deployStep: "activate" }));
      expect(await store.getSource(handed.id)).toStrictEqual(handed);
      expect(await store.findSourceByEndpointKey(handed.endpointKey!)).toStrictEqual(handed);
      const { deployStep: _step, ...rest } = handed;
      const failed = { ...rest, deployError: "the activate hook failed: no" };
      expect(await store.updateSource(failed)).toStrictEqual(failed);
      expect(await store.getSource(handed.id)).toStrictEqual(failed);
      expect(await store.listDeployingSources(2_000)).toStrictEqual([failed]);
      expect((await store.listSourcesOfUser("u_ada", { limit: 10 })).items).toContainEqual(failed);
    });

    it("keeps a deletion's mark (step delete) on every copy, and lists it while marked", async () => {
      const store = await makeStore();
      const made = await store.createSource(source({}));
      const deleting = { ...made, active: false, deployingSince: 3_000, deployStep: "delete" as const };
      expect(await store.updateSource(deleting)).toStrictEqual(deleting);
      expect(await store.getSource(made.id)).toStrictEqual(deleting);
      expect(await store.findSourceByEndpointKey(made.endpointKey!)).toStrictEqual(deleting);
      expect(await store.listDeployingSources(4_000)).toStrictEqual([deleting]);
    });

    it("keeps an update's previous settings on every copy while marked, and drops them with the mark", async () => {
      const store = await makeStore();
      const made = await store.createSource(source({ timer: { intervalSeconds: 60 } }));
      const { timer: _timer, ...previous } = made;
      const updating = {
        ...made,
        configuredProps: { label: "new" },
        deployingSince: 2_000,
        deployStep: "deactivate" as const,
        updateFrom: {
          componentId: previous.componentId,
          name: previous.name,
          nameSlug: previous.nameSlug,
          configuredProps: { label: "old", nested: { secret: { __sluice_sealed: "x" } } },
          propDefinitions: [{ name: "label", type: "string" }],
          active: true,
          timer: { cron: "0 * * * *", timezone: "Europe/Paris" },
        },
      };
      expect(await store.updateSource(updating)).toStrictEqual(updating);
      expect(await store.getSource(made.id)).toStrictEqual(updating);
      expect(await store.findSourceByEndpointKey(made.endpointKey!)).toStrictEqual(updating);
      expect(await store.listDeployingSources(3_000)).toStrictEqual([updating]);
      const { deployingSince: _since, deployStep: _step, updateFrom: _from, ...done } = updating;
      expect(await store.updateSource(done)).toStrictEqual(done);
      expect(await store.getSource(made.id)).toStrictEqual(done);
      expect(await store.listDeployingSources(3_000)).toEqual([]);
    });

    it("saves a deploy claim with its source, refuses a live one, and forgets it on expiry or deletion", async () => {
      const store = await makeStore();
      const first = source();
      const claim = claimOf(first.id);
      await store.createSource(first, claim);
      expect(await store.findDeployClaim("u_ada", claim.key, claim.createdAt)).toStrictEqual(claim);
      // Per user: another user's key of the same text is another claim.
      expect(await store.findDeployClaim("u_bob", claim.key, claim.createdAt)).toBeUndefined();
      expect(await store.findDeployClaim("u_ada", "retry-me 2", claim.createdAt)).toBeUndefined();

      // A second create with the live key saves nothing.
      const second = source();
      await expect(
        store.createSource(second, claimOf(second.id, { createdAt: claim.createdAt + HOUR })),
      ).rejects.toMatchObject({
        code: "conflict",
      });
      expect(await store.getSource(second.id)).toBeUndefined();
      expect((await store.listSourcesOfUser("u_ada", { limit: 10 })).items.map(byId)).toEqual([first.id]);
      const other = source({ userId: "u_bob" });
      await store.createSource(other, claimOf(other.id, { userId: "u_bob" }));
      expect((await store.findDeployClaim("u_bob", claim.key, claim.createdAt))?.sourceId).toBe(other.id);

      // Expired: not found, and a new create may take the key over.
      expect(await store.findDeployClaim("u_ada", claim.key, claim.expiresAt)).toBeUndefined();
      const third = source();
      const later = claimOf(third.id, {
        requestHash: "hash-b",
        createdAt: claim.expiresAt,
        expiresAt: claim.expiresAt + 24 * HOUR,
      });
      await store.createSource(third, later);
      expect(await store.findDeployClaim("u_ada", claim.key, claim.expiresAt)).toStrictEqual(later);
      // Deleting the first source leaves the claim that replaced its own.
      await store.deleteSource(first.id);
      expect(await store.findDeployClaim("u_ada", claim.key, claim.expiresAt)).toStrictEqual(later);
      // Deleting the claim's own source forgets the key.
      await store.deleteSource(third.id);
      expect(await store.findDeployClaim("u_ada", claim.key, claim.expiresAt)).toBeUndefined();
      expect(await store.findDeployClaim("u_bob", claim.key, claim.createdAt)).toBeDefined();
    });
  });
}
