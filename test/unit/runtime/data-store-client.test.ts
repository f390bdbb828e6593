import { describe, expect, it } from "vitest";
import type { DataStoreCaller } from "#runtime/data-store-client";
import type { DataStoreCall, Invocation, Json, WorkflowInvocation } from "#runtime/protocol";
import { runInvocation } from "#runtime/run-invocation";
import { runWorkflowSteps } from "#runtime/run-workflow";

/** A trusted side of one store in memory, answering `list` in pages of `pageSize`; every call is kept. */
function memoryStore(pageSize = 2) {
  const records = new Map<string, Json>();
  const calls: DataStoreCall[] = [];
  const caller: DataStoreCaller = async (sent) => {
    if (!("store" in sent)) return { ok: false, error: { name: "FileStoreError", message: "no File Store here" } };
    const call = sent;
    calls.push(call);
    if (call.store !== "ds_1") return { ok: false, error: { name: "DataStoreError", message: "not bound" } };
    switch (call.op) {
      case "get":
        return records.has(call.key) ? { ok: true, value: records.get(call.key) as Json } : { ok: true };
      case "has":
        return { ok: true, value: records.has(call.key) };
      case "set":
        records.set(call.key, call.value);
        return { ok: true };
      case "delete":
        return { ok: true, value: records.delete(call.key) };
      case "setTtl":
        return { ok: true, value: records.has(call.key) };
      case "clear":
        records.clear();
        return { ok: true };
      case "list": {
        const keys = [...records.keys()].sort().filter((key) => call.after === undefined || key > call.after);
        const page = keys.slice(0, pageSize);
        const value: Record<string, Json> = { keys: page };
        if (!call.keysOnly) value.values = page.map((key) => records.get(key) as Json);
        if (keys.length > pageSize) value.next = page.at(-1) as string;
        return { ok: true, value };
      }
    }
  };
  return { records, calls, caller };
}

let counter = 0;
const invocation = (props: Record<string, Json>): Invocation => ({
  invocationId: `inv_ds_${++counter}`,
  kind: "run",
  sourceId: "dc_test",
  props,
  propTypes: Object.fromEntries(Object.keys(props).map((name) => [name, "data_store"])),
  db: {},
  timeoutMs: 5000,
});

/** Runs `body` as the `run` of a component with one data store prop bound to `ds_1`; what it emitted. */
async function runWith(
  body: (store: any) => Promise<unknown>,
  dataStore?: DataStoreCaller,
  bound: Json = { id: "ds_1", name: "s" },
) {
  const component = {
    props: { store: { type: "data_store" } },
    async run(this: { store: unknown; $emit(event: unknown): void }) {
      this.$emit((await body(this.store)) ?? null);
    },
  };
  const result = await runInvocation(component, invocation({ store: bound }), { onRespond() {}, dataStore });
  return result;
}

describe("a data_store prop in the runtime", () => {
  it("sends each method as one call and gives back what trusted code answers", async () => {
    const { calls, caller } = memoryStore();
    const result = await runWith(async (store) => {
      const value = { list: [1, 2], when: new Date(Date.UTC(2026, 0, 2)) };
      await store.set("a", value, { ttl: 60 });
      value.list.push(3);
      await store.set(7, "seven");
      return {
        a: await store.get("a"),
        seven: await store.get("7"),
        missing: (await store.get("nope")) === undefined,
        has: await store.has("a"),
        ttl: await store.setTtl("a", null),
        deleted: await store.delete("7"),
        keys: await store.keys(),
        identity: [store.id, store.name],
      };
    }, caller);
    expect(result.error).toBeUndefined();
    expect(result.emits[0]?.event).toEqual({
      a: { list: [1, 2], when: "2026-01-02T00:00:00.000Z" },
      seven: "seven",
      missing: true,
      has: true,
      ttl: true,
      deleted: true,
      keys: ["a"],
      identity: ["ds_1", "s"],
    });
    expect(calls.slice(0, 2)).toEqual([
      { op: "set", key: "a", value: { list: [1, 2], when: "2026-01-02T00:00:00.000Z" }, ttl: 60, store: "ds_1" },
      { op: "set", key: "7", value: "seven", store: "ds_1" },
    ]);
    expect(calls).toContainEqual({ op: "setTtl", key: "a", ttl: null, store: "ds_1" });
  });

  it("reads every record page by page: awaited entries(), for await over entries() and over the store", async () => {
    const { records, caller, calls } = memoryStore(2);
    for (const key of ["e", "a", "c", "b", "d"]) records.set(key, key.toUpperCase());
    const result = await runWith(async (store) => {
      const awaited = await store.entries();
      const iterated: unknown[] = [];
      for await (const entry of store.entries()) iterated.push(entry);
      const object: Record<string, unknown> = {};
      for await (const [key, value] of store) object[key] = value;
      return { awaited, iterated, object, keys: await store.keys() };
    }, caller);
    const all = [
      ["a", "A"],
      ["b", "B"],
      ["c", "C"],
      ["d", "D"],
      ["e", "E"],
    ];
    expect(result.emits[0]?.event).toEqual({
      awaited: all,
      iterated: all,
      object: { a: "A", b: "B", c: "C", d: "D", e: "E" },
      keys: ["a", "b", "c", "d", "e"],
    });
    expect(
      calls.filter((call) => call.op === "list" && call.keysOnly).map((call) => (call as { after?: string }).after),
    ).toEqual([undefined, "b", "d"]);
  });

  it.each<[string, (store: any) => Promise<unknown>, RegExp]>([
    ["an object key", (store) => store.get({ k: 1 }), /key must be a string, not object/],
    ["a key over 512 bytes", (store) => store.has("é".repeat(257)), /at most 512 bytes/],
    ["a function value", (store) => store.set("k", { f() {} }), /not JSON-serialisable: it contains a function/],
    ["a bigint value", (store) => store.set("k", 1n), /not JSON-serialisable: it contains a bigint/],
    [
      "a cycle",
      (store) => {
        const a: Record<string, unknown> = {};
        a.a = a;
        return store.set("k", a);
      },
      /not JSON-serialisable/,
    ],
    ["a value over 256 KiB", (store) => store.set("k", "x".repeat(256 * 1024)), /over the limit of 262144/],
    ["a zero TTL", (store) => store.set("k", 1, { ttl: 0 }), /ttl must be a number of seconds above 0/],
    ["a TTL as text", (store) => store.setTtl("k", "60"), /ttl must be/],
  ])("throws at the call for %s, sending nothing", async (_, call, message) => {
    const { calls, caller } = memoryStore();
    const result = await runWith(async (store) => call(store), caller);
    expect(result.error?.message).toMatch(message);
    expect(calls).toEqual([]);
  });

  it("throws trusted code's refusal, and the binding's error of a prop bound to no store", async () => {
    const { caller } = memoryStore();
    const refused = await runWith((store) => store.get("k"), caller, { id: "ds_forged", name: "x" });
    expect(refused.error).toMatchObject({ name: "DataStoreError", message: "not bound" });
    const unbound = await runWith((store) => store.keys(), caller, {
      error: "data store ds_9 not found in this workspace",
    });
    expect(unbound.error?.message).toBe("data store ds_9 not found in this workspace");
    const noService = await runWith((store) => store.get("k"), undefined);
    expect(noService.error?.message).toBe("data stores are not available on this platform yet");
  });

  it("gives a workflow step's data_store prop the run's caller", async () => {
    const { caller, records } = memoryStore();
    const step = {
      props: { store: { type: "data_store" } },
      async run(this: { store: any }) {
        await this.store.set("seen", true);
        return this.store.keys();
      },
    };
    const invocation: WorkflowInvocation = {
      invocationId: "inv_wf_ds",
      kind: "workflow",
      workflowId: "p_1",
      trigger: { event: {}, context: {} },
      context: {},
      steps: [
        {
          id: "c_1",
          namespace: "one",
          module: "m",
          props: { store: { id: "ds_1", name: "s" } },
          propTypes: { store: "data_store" },
          db: {},
        },
      ],
      respondable: false,
      timeoutMs: 5000,
      limits: { maxEmits: 10, maxEmitBytes: 10_000, maxSends: 10, maxSendBytes: 10_000, maxExportBytes: 10_000 },
    };
    const result = await runWorkflowSteps(async () => step, invocation, caller);
    expect(result.steps[0]?.status).toBe("success");
    expect(records.get("seen")).toBe(true);
  });
});
