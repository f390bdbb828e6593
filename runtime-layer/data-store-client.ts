/**
 * `this.<prop>` of a `data_store` prop (real-behaviour.md §1.4): the original's async methods
 * `get`, `set(key, value, {ttl})`, `has`, `delete`, `keys`, `entries`, `clear`, `setTtl(key, ttl)`
 * and `for await (const [key, value] of store)`. The store is not here: each method is one round
 * trip to trusted code (`DataStoreCall`), which checks it again as hostile input. Checks made here
 * too give the component its error at the call, with the same words.
 */
import {
  DATA_STORE_VALUE_MAX_BYTES,
  type DataStoreCall,
  type DataStoreReply,
  dataStoreKeyProblem,
  dataStoreTtlProblem,
  type Json,
  type ServiceCall,
} from "./protocol.ts";

/** Sends one call to trusted code; resolves with its reply (never rejects). */
export type DataStoreCaller = (call: ServiceCall) => Promise<DataStoreReply>;

/** A call before the client adds its store. */
type WithoutStore<C> = C extends unknown ? Omit<C, "store"> : never;
type Request = WithoutStore<DataStoreCall>;

type Bag = Record<string, unknown>;

/** What a `data_store` prop arrives as in `Invocation.props`: the bound store, or why there is none. */
function storeOf(value: Json): { id: string; name: string } | { error: string } {
  const bag = (typeof value === "object" && value !== null && !Array.isArray(value) ? value : {}) as Bag;
  if (typeof bag.id === "string") return { id: bag.id, name: typeof bag.name === "string" ? bag.name : bag.id };
  return { error: typeof bag.error === "string" ? bag.error : "this data_store prop is bound to no data store" };
}

/** The key as the original takes it: a string (numbers are turned into one). */
function dataStoreKey(key: unknown): string {
  const name = typeof key === "number" && Number.isFinite(key) ? String(key) : key;
  const problem = dataStoreKeyProblem(name);
  if (problem) throw new TypeError(problem);
  return name as string;
}

/** A TTL in seconds, or `null` for none. */
function dataStoreTtl(ttl: unknown): number | null {
  const problem = dataStoreTtlProblem(ttl);
  if (problem)
    throw new TypeError(`${problem} (got ${ttl === null ? "null" : typeof ttl === "number" ? ttl : typeof ttl})`);
  return (ttl as number | undefined) ?? null;
}

/** The value as stored: JSON data (Dates as their ISO text), within the size limit. */
function storedValue(key: string, value: unknown): Json {
  let text: string | undefined;
  try {
    text = JSON.stringify(value, (_name, item: unknown) => {
      if (typeof item === "function" || typeof item === "symbol" || typeof item === "bigint") {
        throw new TypeError(`it contains a ${typeof item}`);
      }
      return item;
    });
  } catch (error) {
    throw new TypeError(
      `data store: the value for key "${key}" is not JSON-serialisable: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  text ??= "null";
  if (Buffer.byteLength(text) > DATA_STORE_VALUE_MAX_BYTES) {
    throw new RangeError(
      `data store: the value for key "${key}" is ${Buffer.byteLength(text)} bytes as JSON, over the limit of ${DATA_STORE_VALUE_MAX_BYTES}`,
    );
  }
  return JSON.parse(text) as Json;
}

/** One page of `list`, as trusted code answers it. */
interface ListPage {
  keys: string[];
  values?: Json[];
  next?: string;
}

/**
 * The object a `data_store` prop's code sees. `entries()` can be awaited (an array of
 * `[key, value]`) or iterated with `for await`, as code written for either reading does.
 */
export function createDataStoreClient(value: Json, send: DataStoreCaller | undefined): Bag {
  const bound = storeOf(value);
  const call = async (request: Request): Promise<Json | undefined> => {
    if ("error" in bound) throw new Error(bound.error);
    if (!send) throw new Error("data stores are not available on this platform yet");
    const reply = await send({ ...request, store: bound.id } as DataStoreCall);
    if (reply.ok) return reply.value;
    throw Object.assign(new Error(reply.error.message), { name: reply.error.name });
  };
  async function* pages(keysOnly: boolean): AsyncGenerator<ListPage> {
    let after: string | undefined;
    do {
      const page = (await call(after === undefined ? { op: "list", keysOnly } : { op: "list", after, keysOnly })) as
        | ListPage
        | undefined;
      if (!page) return;
      yield page;
      after = page.next;
    } while (after !== undefined);
  }
  async function* records(): AsyncGenerator<[string, Json]> {
    for await (const page of pages(false)) {
      for (const [index, key] of page.keys.entries()) yield [key, page.values?.[index] ?? null];
    }
  }
  const allRecords = async () => {
    const all: [string, Json][] = [];
    for await (const record of records()) all.push(record);
    return all;
  };
  const store: Bag = {
    id: "error" in bound ? undefined : bound.id,
    name: "error" in bound ? undefined : bound.name,
    get: async (key: unknown) => call({ op: "get", key: dataStoreKey(key) }),
    set: async (key: unknown, item: unknown, options?: unknown) => {
      const name = dataStoreKey(key);
      const ttl = dataStoreTtl((options as { ttl?: unknown } | undefined)?.ttl);
      const request: Request = { op: "set", key: name, value: storedValue(name, item) };
      if (ttl !== null) (request as { ttl?: number }).ttl = ttl;
      await call(request);
    },
    has: async (key: unknown) => (await call({ op: "has", key: dataStoreKey(key) })) === true,
    delete: async (key: unknown) => (await call({ op: "delete", key: dataStoreKey(key) })) === true,
    setTtl: async (key: unknown, ttl: unknown) =>
      (await call({ op: "setTtl", key: dataStoreKey(key), ttl: dataStoreTtl(ttl) })) === true,
    clear: async () => {
      await call({ op: "clear" });
    },
    keys: async () => {
      const keys: string[] = [];
      for await (const page of pages(true)) keys.push(...page.keys);
      return keys;
    },
    entries: () => {
      // Awaitable and async-iterable: `await store.entries()` and `for await (... of store.entries())`.
      let all: Promise<[string, Json][]> | undefined;
      return {
        [Symbol.asyncIterator]: records,
        // biome-ignore lint/suspicious/noThenProperty: awaiting it is one of the two ways code reads entries.
        then: (resolve: (value: unknown) => unknown, reject: (reason: unknown) => unknown) => {
          all ??= allRecords();
          return all.then(resolve, reject);
        },
      };
    },
    [Symbol.asyncIterator]: records,
  };
  return store;
}
