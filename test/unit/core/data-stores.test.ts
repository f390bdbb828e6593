import { describe, expect, it } from "vitest";
import {
  bindDataStoreProps,
  DATA_STORE_CALLS_PER_RUN,
  DATA_STORE_CALLS_WAITING,
  DATA_STORE_RECORDS_MAX,
  DATA_STORES_PER_WORKSPACE,
  dataStoreService,
  grantDataStores,
  listDataStoreRecords,
  parseDataStoreCall,
  serveGrantedCall,
} from "#core/data-stores";
import type { DataStoreStore } from "#core/ports/data-store-store";
import type { Json } from "#runtime/protocol";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { recordingLogger } from "../../support/recording-logger.ts";

const START = Date.UTC(2026, 10, 20, 12);

/** A store of workspace `o_a` named `name`, bound for a run: the deps, its id and the run's service. */
async function boundStore(name = "s") {
  const deps = memoryDeps(START);
  const bound = new Set<string>();
  const props = await bindDataStoreProps(deps, "o_a", "dc_src", { store: { name } }, { store: "data_store" }, bound);
  const id = (props.store as { id: string }).id;
  return { deps, id, serve: dataStoreService(deps, bound) };
}

describe("bindDataStoreProps", () => {
  it("binds a store by id, by name (created once) and an unset prop to a store of its own", async () => {
    const deps = memoryDeps(START);
    const bound = new Set<string>();
    const types = { byName: "data_store", own: "data_store", again: "data_store", text: "string" };
    const first = await bindDataStoreProps(
      deps,
      "o_a",
      "dc_src",
      { byName: { name: "orders" }, again: { name: "orders" }, text: "t" },
      types,
      bound,
    );
    const orders = first.byName as { id: string; name: string };
    expect(orders).toEqual({ id: expect.stringMatching(/^ds_/), name: "orders" });
    expect(first.again).toEqual(orders);
    expect(first.own).toEqual({ id: expect.stringMatching(/^ds_/), name: "dc_src/own" });
    expect(first.text).toBe("t");
    expect(bound).toEqual(new Set([orders.id, (first.own as { id: string }).id]));

    const byId = await bindDataStoreProps(deps, "o_a", "dc_other", { s: orders.id }, { s: "data_store" }, new Set());
    expect(byId.s).toEqual(orders);
    expect((await deps.dataStores.listStores("o_a")).map((store) => store.name)).toEqual(["dc_src/own", "orders"]);
  });

  it("binds another workspace's id, or a missing one, to an error and gives the run no access to it", async () => {
    const deps = memoryDeps(START);
    const theirs = await bindDataStoreProps(deps, "o_b", "dc_b", { s: { name: "x" } }, { s: "data_store" }, new Set());
    const theirId = (theirs.s as { id: string }).id;
    const bound = new Set<string>();
    const props = await bindDataStoreProps(
      deps,
      "o_a",
      "dc_a",
      { s: theirId, t: "ds_00000000000000000000" },
      { s: "data_store", t: "data_store" },
      bound,
    );
    expect(props.s).toEqual({ error: `data store ${theirId} not found in this workspace` });
    expect(props.t).toEqual({ error: "data store ds_00000000000000000000 not found in this workspace" });
    expect(bound.size).toBe(0);
  });

  it("binds a prop to the limit's error when the workspace has all the stores it may have", async () => {
    const deps = memoryDeps(START);
    for (let n = 0; n < DATA_STORES_PER_WORKSPACE; n++) {
      await bindDataStoreProps(deps, "o_a", "dc", { s: { name: `n${n}` } }, { s: "data_store" }, new Set());
    }
    const props = await bindDataStoreProps(deps, "o_a", "dc", {}, { s: "data_store" }, new Set());
    expect(props.s).toEqual({
      error: expect.stringContaining(`the workspace has ${DATA_STORES_PER_WORKSPACE} data stores`),
    });
  });
});

describe("dataStoreService: the trusted side of the calls", () => {
  it("serves set, get, has, delete, list and clear on the run's store", async () => {
    const { serve, id } = await boundStore();
    expect(await serve({ store: id, op: "set", key: "a", value: { n: [1, "x", null] } })).toEqual({ ok: true });
    expect(await serve({ store: id, op: "set", key: "b", value: "" })).toEqual({ ok: true });
    expect(await serve({ store: id, op: "get", key: "a" })).toEqual({ ok: true, value: { n: [1, "x", null] } });
    expect(await serve({ store: id, op: "get", key: "nope" })).toEqual({ ok: true });
    expect(await serve({ store: id, op: "has", key: "b" })).toEqual({ ok: true, value: true });
    expect(await serve({ store: id, op: "list" })).toEqual({
      ok: true,
      value: { keys: ["a", "b"], values: [{ n: [1, "x", null] }, ""] },
    });
    expect(await serve({ store: id, op: "list", keysOnly: true, after: "a" })).toEqual({
      ok: true,
      value: { keys: ["b"] },
    });
    expect(await serve({ store: id, op: "delete", key: "a" })).toEqual({ ok: true, value: true });
    expect(await serve({ store: id, op: "delete", key: "a" })).toEqual({ ok: true, value: false });
    expect(await serve({ store: id, op: "clear" })).toEqual({ ok: true });
    expect(await serve({ store: id, op: "has", key: "b" })).toEqual({ ok: true, value: false });
  });

  it("expires a record its TTL after it was set, by the clock, and keeps the expiry when set again without one", async () => {
    const { serve, id, deps } = await boundStore();
    await serve({ store: id, op: "set", key: "token", value: "t1", ttl: 60 });
    deps.clock.set(START + 59_999);
    await serve({ store: id, op: "set", key: "token", value: "t2" });
    expect(await serve({ store: id, op: "get", key: "token" })).toEqual({ ok: true, value: "t2" });
    deps.clock.set(START + 60_000);
    expect(await serve({ store: id, op: "get", key: "token" })).toEqual({ ok: true });
    expect(await serve({ store: id, op: "list" })).toEqual({ ok: true, value: { keys: [], values: [] } });

    await serve({ store: id, op: "set", key: "kept", value: 1, ttl: 0.5 });
    expect(await serve({ store: id, op: "setTtl", key: "kept", ttl: null })).toEqual({ ok: true, value: true });
    deps.clock.set(START + 10_000_000);
    expect(await serve({ store: id, op: "get", key: "kept" })).toEqual({ ok: true, value: 1 });
    expect(await serve({ store: id, op: "setTtl", key: "kept", ttl: 1 })).toEqual({ ok: true, value: true });
    expect(await serve({ store: id, op: "setTtl", key: "missing", ttl: 1 })).toEqual({ ok: true, value: false });
    deps.clock.set(START + 10_001_000);
    expect(await serve({ store: id, op: "has", key: "kept" })).toEqual({ ok: true, value: false });
  });

  it("refuses a store the run was not given, even one that exists in the same or another workspace", async () => {
    const { serve, id, deps } = await boundStore();
    const other = await bindDataStoreProps(deps, "o_b", "dc_b", {}, { s: "data_store" }, new Set());
    const otherId = (other.s as { id: string }).id;
    await deps.dataStores.putEntry(otherId, { key: "secret", value: '"theirs"', expiry: null }, START, 10);
    for (const op of ["get", "clear", "delete"]) {
      expect(await serve({ store: otherId, op, key: "secret" })).toEqual({
        ok: false,
        error: { name: "DataStoreError", message: `data store ${otherId} is not bound to this run` },
      });
    }
    expect(await deps.dataStores.getEntry(otherId, "secret", START)).toEqual({ key: "secret", value: '"theirs"' });
    expect(await serve({ store: id, op: "has", key: "secret" })).toEqual({ ok: true, value: false });
  });

  it.each<[string, unknown, RegExp]>([
    ["no object", "get", /must be an object/],
    ["no store", { op: "get", key: "k" }, /must name its store/],
    ["an unknown method", { store: "S", op: "drop" }, /known method/],
    ["a key that is no string", { store: "S", op: "get", key: { k: 1 } }, /key must be a string/],
    ["a key over the limit", { store: "S", op: "get", key: "k".repeat(513) }, /at most 512 bytes/],
    ["a value that is no JSON", { store: "S", op: "set", key: "k", value: { f: () => 1 } }, /is not JSON/],
    ["a value over the limit", { store: "S", op: "set", key: "k", value: "v".repeat(256 * 1024) }, /over the limit/],
    ["a negative TTL", { store: "S", op: "set", key: "k", value: 1, ttl: -1 }, /ttl must be/],
    ["a TTL of years", { store: "S", op: "setTtl", key: "k", ttl: 11 * 365 * 86400 }, /ttl must be/],
    ["a TTL as text", { store: "S", op: "setTtl", key: "k", ttl: "60" }, /ttl must be/],
    ["a bad cursor", { store: "S", op: "list", after: 5 }, /after must be a string/],
  ])("refuses a call with %s before reading anything", async (_, raw, message) => {
    const { serve, id } = await boundStore();
    const call =
      typeof raw === "object" && raw !== null ? { ...raw, store: (raw as { store?: string }).store && id } : raw;
    expect(await serve(call)).toEqual({
      ok: false,
      error: { name: "DataStoreError", message: expect.stringMatching(message) },
    });
  });

  it("keeps JSON text as given: a record's value is parsed back the same, and a `__proto__` key is data", () => {
    const value = JSON.parse('{"__proto__": {"x": 1}, "a": [true, 1.5]}') as Json;
    expect(parseDataStoreCall({ store: "s", op: "set", key: "__proto__", value })).toEqual({
      store: "s",
      op: "set",
      key: "__proto__",
      value,
    });
  });

  it("refuses a new key of a full store with the limit's words, and still overwrites", async () => {
    const { serve, id, deps } = await boundStore();
    for (let n = 0; n < DATA_STORE_RECORDS_MAX; n++) {
      await deps.dataStores.putEntry(id, { key: `k${n}`, value: "0", expiry: null }, START, DATA_STORE_RECORDS_MAX);
    }
    expect(await serve({ store: id, op: "set", key: "one-more", value: 1 })).toEqual({
      ok: false,
      error: {
        name: "DataStoreError",
        message: `data store ${id} holds ${DATA_STORE_RECORDS_MAX} records, its limit: delete some first`,
      },
    });
    expect(await serve({ store: id, op: "set", key: "k0", value: 1 })).toEqual({ ok: true });
    // `keys()` reads such a store in pages of 1000.
    const first = await serve({ store: id, op: "list", keysOnly: true });
    expect(first.ok && (first.value as { keys: string[]; next: string }).keys).toHaveLength(1000);
    const sorted = Array.from({ length: DATA_STORE_RECORDS_MAX }, (_, n) => `k${n}`).sort();
    expect(first.ok && (first.value as { next?: string }).next).toBe(sorted[999]);
  });

  it("refuses calls past the number one run may have waiting, and past the number it may make", async () => {
    const { serve, id } = await boundStore();
    const flood = await Promise.all(
      Array.from({ length: DATA_STORE_CALLS_WAITING + 10 }, (_, n) => serve({ store: id, op: "get", key: `k${n}` })),
    );
    const refused = flood.filter((reply) => !reply.ok);
    // Four are served at once; a thousand wait their turn.
    expect(refused).toHaveLength(6);
    expect(refused[0]).toEqual({
      ok: false,
      error: {
        name: "DataStoreError",
        message: `one run may have at most ${DATA_STORE_CALLS_WAITING} data store calls waiting at once`,
      },
    });
    for (let n = flood.length; n < DATA_STORE_CALLS_PER_RUN; n += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, DATA_STORE_CALLS_PER_RUN - n) }, () =>
          serve({ store: id, op: "has", key: "k" }),
        ),
      );
    }
    expect(await serve({ store: id, op: "has", key: "k" })).toEqual({
      ok: false,
      error: {
        name: "DataStoreError",
        message: `one run may make at most ${DATA_STORE_CALLS_PER_RUN} data store calls`,
      },
    });
  });

  it("answers a store failure with a generic refusal and logs it", async () => {
    const errors: Record<string, unknown>[] = [];
    const deps = { ...memoryDeps(START), log: recordingLogger(errors) };
    const failing = new Proxy(deps.dataStores, {
      get: (target, member) =>
        member === "getEntry" ? () => Promise.reject(new Error("disk gone")) : Reflect.get(target, member),
    }) as DataStoreStore;
    const serve = dataStoreService({ ...deps, dataStores: failing }, new Set(["ds_x"]));
    expect(await serve({ store: "ds_x", op: "get", key: "k" })).toEqual({
      ok: false,
      error: { name: "DataStoreError", message: "the data store could not be reached; try again" },
    });
    expect(errors).toEqual([expect.objectContaining({ message: "data store call failed", data_store_id: "ds_x" })]);
  });
});

describe("grants: the calls of a runtime that cannot message its host", () => {
  it("serves a call with a sealed grant of the run's stores until the run's time limit (+10 s), and nothing else", async () => {
    const { deps, id } = await boundStore();
    const { url, grant } = await grantDataStores(deps, "inv_1", new Set([id]), 30_000);
    expect(url).toBe("http://127.0.0.1:4000/v1/data_store_calls");
    expect(await serveGrantedCall(deps, grant, { store: id, op: "set", key: "k", value: 1 })).toEqual({ ok: true });
    expect(await serveGrantedCall(deps, grant, { store: "ds_other", op: "get", key: "k" })).toMatchObject({
      ok: false,
      error: { message: "data store ds_other is not bound to this run" },
    });
    const changed = `${grant.slice(0, -2)}${grant.endsWith("A") ? "B" : "A"}=`;
    expect(await serveGrantedCall(deps, changed, { store: id, op: "get", key: "k" })).toMatchObject({
      error: { message: "the data store grant is not valid" },
    });
    deps.clock.set(START + 40_000);
    expect(await serveGrantedCall(deps, grant, { store: id, op: "get", key: "k" })).toEqual({ ok: true, value: 1 });
    deps.clock.set(START + 40_001);
    expect(await serveGrantedCall(deps, grant, { store: id, op: "get", key: "k" })).toMatchObject({
      error: { message: "the data store grant has expired: its run has ended" },
    });
  });
});

describe("listDataStoreRecords", () => {
  it("pages a store's records in key order for a member, and answers not found to anyone else", async () => {
    const deps = memoryDeps(START);
    const owner = await accountIn(deps, "owner");
    const stranger = await accountIn(deps, "stranger");
    const bound = new Set<string>();
    const props = await bindDataStoreProps(deps, owner.workspace.id, "dc", {}, { s: "data_store" }, bound);
    const id = (props.s as { id: string }).id;
    for (const key of ["c", "a", "b"])
      await deps.dataStores.putEntry(id, { key, value: `"${key}"`, expiry: null }, START, 10);
    await deps.dataStores.putEntry(id, { key: "t", value: "1", expiry: START + 1000 }, START, 10);

    const caller = { userId: owner.user.id };
    const first = await listDataStoreRecords(deps, caller, id, { limit: 2 });
    expect(first.data.map((record) => record.key)).toEqual(["a", "b"]);
    expect(first.page_info).toMatchObject({ total_count: 4, count: 2 });
    const rest = await listDataStoreRecords(deps, caller, id, { limit: 10, after: "b" });
    expect(rest.data).toEqual([
      { key: "c", value: "c", expires_at: null },
      { key: "t", value: 1, expires_at: new Date(START + 1000).toISOString() },
    ]);
    expect(rest.page_info.end_cursor).toBeNull();
    await expect(listDataStoreRecords(deps, { userId: stranger.user.id }, id, { limit: 2 })).rejects.toMatchObject({
      code: "not_found",
      message: "data store not found",
    });
  });
});
