/**
 * Data stores (real-behaviour.md §1.4): a workspace's named key-value stores, reached by component
 * code through `data_store` props. The code never touches a store: each method it calls is a
 * `DataStoreCall` the runtime sends while the run goes on, served here ({@link dataStoreService})
 * against the stores bound to that run's props ({@link bindDataStoreProps}). Everything in a call
 * is hostile input: forged store ids, oversized values, floods of calls.
 *
 * Also the REST views: a workspace's stores, a store's records, clearing and deleting a store.
 */
import type { Caller } from "#core/identity";
import type { InvokeHandlers } from "#core/ports/component-host";
import type { DataStoreEntry, DataStoreRecord, EntryExpiry } from "#core/ports/data-store-store";
import type { Deps } from "#core/ports/deps";
import { jsonBytesWithin } from "#runtime/json-value";
import {
  DATA_STORE_CALLS_PER_RUN,
  DATA_STORE_KEY_MAX_BYTES,
  DATA_STORE_TTL_MAX_SECONDS,
  DATA_STORE_VALUE_MAX_BYTES,
  type DataStoreCall,
  type DataStoreReply,
  dataStoreKeyProblem,
  dataStoreTtlProblem,
  isFileStoreCall,
  type Json,
} from "#runtime/protocol";
import { requireDataStore, requireWorkspace } from "./access.ts";
import { conflict, isDomainError } from "./errors.ts";
import { mayUseFiles, parseFileStoreCall, serveFileStoreCall } from "./file-stores.ts";
import { isJsonValue } from "./json-value.ts";
import { encodeCursor, PAGE_MAX_BYTES, type PageInfo } from "./pagination.ts";
import { DATA_STORE_NAME_MAX_CHARS } from "./prop-types.ts";
import { isoTime } from "./time.ts";

export {
  DATA_STORE_CALLS_PER_RUN,
  DATA_STORE_KEY_MAX_BYTES,
  DATA_STORE_NAME_MAX_CHARS,
  DATA_STORE_TTL_MAX_SECONDS,
  DATA_STORE_VALUE_MAX_BYTES,
};

/** Stores one workspace may have. */
export const DATA_STORES_PER_WORKSPACE = 100;
/** Live records one store may hold. */
export const DATA_STORE_RECORDS_MAX = 10_000;
/** Calls of one run waiting for an answer at once; past it a call is refused at once. */
export const DATA_STORE_CALLS_WAITING = 1_000;
/** Calls of one run served at the same time (a run's `Promise.all` of 1000 `get`s waits its turn). */
const CALLS_AT_ONCE = 4;
/** One page of `keys()`, `entries()` or `for await`. */
export const DATA_STORE_LIST_PAGE = { limit: 1000, maxBytes: 4 * 1024 * 1024 } as const;

const DATA_STORE_TYPE = "data_store";

type StoreDeps = Pick<Deps, "dataStores" | "files" | "clock" | "ids" | "log">;

/** What a `data_store` prop is bound to in `Invocation.props`, or why it is bound to nothing. */
type BoundStore = { id: string; name: string } | { error: string };

/**
 * Binds every `data_store` prop of `props` (as `runtimeProps` made them) to a store of the
 * workspace: a `ds_` id must name one of its stores; `{"name": ...}` finds the store of that name or
 * creates it; no value (or `{}`) gets the prop a store of its own, named `<ownName>/<prop>`
 * (`dc_.../dataStore`, `c_.../dataStore` for a workflow step). Without `ownName` (the dynamic props
 * endpoints, which configure a component that is no source yet) such a prop is bound to nothing:
 * its own store would be named after a source that does not exist. A prop that cannot be bound gets
 * `{error}`, and its methods throw it: a store of another workspace is "not found", as a missing
 * one. Returns new props; the ids bound are added to `bound`.
 */
export async function bindDataStoreProps(
  deps: StoreDeps,
  workspaceId: string,
  ownName: string | undefined,
  props: Record<string, Json>,
  propTypes: Record<string, string>,
  bound: Set<string>,
): Promise<Record<string, Json>> {
  const names = Object.keys(propTypes).filter((name) => propTypes[name] === DATA_STORE_TYPE);
  if (names.length === 0) return props;
  const out: Record<string, Json> = { ...props };
  for (const name of names) {
    const store = await bindOne(
      deps,
      workspaceId,
      ownName === undefined ? undefined : `${ownName}/${name}`,
      props[name],
    );
    if ("id" in store) bound.add(store.id);
    out[name] = store;
  }
  return out;
}

async function bindOne(
  deps: StoreDeps,
  workspaceId: string,
  ownName: string | undefined,
  value: Json | undefined,
): Promise<BoundStore> {
  if (typeof value === "string") {
    const store = await deps.dataStores.getStore(value);
    if (!store || store.workspaceId !== workspaceId)
      return { error: `data store ${value} not found in this workspace` };
    return { id: store.id, name: store.name };
  }
  const named = typeof value === "object" && value !== null && !Array.isArray(value) ? value.name : undefined;
  const name = typeof named === "string" ? named : ownName;
  if (name === undefined) {
    return { error: 'this data_store prop has no store yet: configure it with a ds_ id or {"name": ...}' };
  }
  try {
    const store = await findOrCreateStore(deps, workspaceId, name);
    return { id: store.id, name: store.name };
  } catch (error) {
    if (isDomainError(error) && error.code === "conflict") return { error: error.message };
    throw error;
  }
}

function findOrCreateStore(deps: StoreDeps, workspaceId: string, name: string): Promise<DataStoreRecord> {
  const candidate = { id: deps.ids.newId("dataStore"), workspaceId, name, createdAt: deps.clock.nowMs() };
  return deps.dataStores.findOrCreateStore(candidate, DATA_STORES_PER_WORKSPACE);
}

const refusal = (message: string): DataStoreReply => ({ ok: false, error: { name: "DataStoreError", message } });

/**
 * Serves the data store calls of one run, whose props were bound to `stores` (all of one
 * workspace). Each call is checked whole before anything is read; a call naming a store the run
 * was not given is refused (whatever workspace owns it). Calls are served a few at a time, in
 * order; past {@link DATA_STORE_CALLS_WAITING} waiting or {@link DATA_STORE_CALLS_PER_RUN} in all,
 * a call is refused at once. The returned function never rejects.
 */
export function dataStoreService(
  deps: StoreDeps,
  stores: ReadonlySet<string>,
  /** The project whose File Store the run's `$.files` reaches; absent: it has none. */
  projectId?: string,
): (raw: unknown) => Promise<DataStoreReply> {
  let calls = 0;
  let running = 0;
  const waiting: (() => void)[] = [];
  const turn = async <T>(work: () => Promise<T>): Promise<T> => {
    if (running >= CALLS_AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
    running += 1;
    try {
      return await work();
    } finally {
      running -= 1;
      waiting.shift()?.();
    }
  };
  return async (raw) => {
    calls += 1;
    if (calls > DATA_STORE_CALLS_PER_RUN)
      return refusal(`one run may make at most ${DATA_STORE_CALLS_PER_RUN} data store calls`);
    if (waiting.length >= DATA_STORE_CALLS_WAITING) {
      return refusal(`one run may have at most ${DATA_STORE_CALLS_WAITING} data store calls waiting at once`);
    }
    if (isFileStoreCall(raw)) return fileStoreCall(deps, projectId, raw, turn);
    const call = parseDataStoreCall(raw);
    if (typeof call === "string") return refusal(call);
    if (!stores.has(call.store)) return refusal(`data store ${call.store.slice(0, 80)} is not bound to this run`);
    return turn(async () => {
      try {
        return { ok: true, ...(await serve(deps, call)) };
      } catch (error) {
        if (isDomainError(error) && error.code === "conflict") return refusal(error.message);
        deps.log.error("data store call failed", { data_store_id: call.store, op: call.op, error: String(error) });
        return refusal("the data store could not be reached; try again");
      }
    });
  };
}

/** A `$.files` call of a run of `projectId` (none: the run has no File Store), served in the run's `turn`. */
async function fileStoreCall(
  deps: StoreDeps,
  projectId: string | undefined,
  raw: unknown,
  turn: <T>(work: () => Promise<T>) => Promise<T>,
): Promise<DataStoreReply> {
  const fileRefusal = (message: string): DataStoreReply => ({ ok: false, error: { name: "FileStoreError", message } });
  if (projectId === undefined) {
    return fileRefusal("$.files: this run has no File Store (workflow steps and actions run in a project have one)");
  }
  const call = parseFileStoreCall(raw);
  if (typeof call === "string") return fileRefusal(call);
  return turn(async () => {
    try {
      return { ok: true, ...(await serveFileStoreCall(deps, projectId, call)) };
    } catch (error) {
      if (isDomainError(error) && (error.code === "conflict" || error.code === "validation")) {
        return fileRefusal(error.message);
      }
      deps.log.error("file store call failed", { project_id: projectId, op: call.op, error: String(error) });
      return fileRefusal("the File Store could not be reached; try again");
    }
  });
}

type Bag = Record<string, unknown>;
const isBag = (value: unknown): value is Bag => typeof value === "object" && value !== null && !Array.isArray(value);

/** The call, checked as hostile input, or why it is refused (in words). */
export function parseDataStoreCall(raw: unknown): DataStoreCall | string {
  if (!isBag(raw)) return "a data store call must be an object";
  const { store, op, key, value, ttl, after, keysOnly } = raw;
  if (typeof store !== "string" || store.length === 0) return "a data store call must name its store";
  switch (op) {
    case "get":
    case "has":
    case "delete":
      return dataStoreKeyProblem(key) ?? { store, op, key: key as string };
    case "set": {
      const problem = dataStoreKeyProblem(key) ?? dataStoreTtlProblem(ttl);
      if (problem) return problem;
      if (!isJsonValue(value)) return `the value for key "${(key as string).slice(0, 80)}" is not JSON`;
      if (jsonBytesWithin(value, DATA_STORE_VALUE_MAX_BYTES) > DATA_STORE_VALUE_MAX_BYTES) {
        return `the value for key "${(key as string).slice(0, 80)}" is over the limit of ${DATA_STORE_VALUE_MAX_BYTES} bytes`;
      }
      return typeof ttl === "number"
        ? { store, op, key: key as string, value, ttl }
        : { store, op, key: key as string, value };
    }
    case "setTtl":
      return (
        dataStoreKeyProblem(key) ??
        dataStoreTtlProblem(ttl) ?? { store, op, key: key as string, ttl: (ttl as number | null) ?? null }
      );
    case "list": {
      const afterProblem = after === undefined ? undefined : dataStoreKeyProblem(after, "after");
      if (afterProblem) return afterProblem;
      if (keysOnly !== undefined && typeof keysOnly !== "boolean") return "keysOnly must be a boolean";
      const call: DataStoreCall = { store, op, keysOnly: keysOnly === true };
      if (typeof after === "string") call.after = after;
      return call;
    }
    case "clear":
      return { store, op };
    default:
      return "a data store call must name a known method";
  }
}

/** Epoch ms `ttl` seconds after now (whole ms, rounded up so a TTL never ends early). */
const expiryAfter = (nowMs: number, ttl: number) => nowMs + Math.ceil(ttl * 1000);

async function serve(deps: StoreDeps, call: DataStoreCall): Promise<{ value?: Json }> {
  const now = deps.clock.nowMs();
  const stores = deps.dataStores;
  switch (call.op) {
    case "get": {
      const entry = await stores.getEntry(call.store, call.key, now);
      return entry ? { value: JSON.parse(entry.value) as Json } : {};
    }
    case "has":
      return { value: (await stores.getEntry(call.store, call.key, now)) !== undefined };
    case "set": {
      const expiry: EntryExpiry = call.ttl === undefined || call.ttl === null ? "keep" : expiryAfter(now, call.ttl);
      const entry = { key: call.key, value: JSON.stringify(call.value), expiry };
      const outcome = await stores.putEntry(call.store, entry, now, DATA_STORE_RECORDS_MAX);
      if (outcome === "full") {
        throw conflict(
          `data store ${call.store} holds ${DATA_STORE_RECORDS_MAX} records, its limit: delete some first`,
        );
      }
      if (outcome === "gone") throw conflict(`data store ${call.store} was deleted`);
      return {};
    }
    case "setTtl": {
      const expiresAt = call.ttl === null ? null : expiryAfter(now, call.ttl);
      return { value: await stores.setExpiry(call.store, call.key, expiresAt, now) };
    }
    case "delete":
      return { value: await stores.deleteEntry(call.store, call.key, now) };
    case "clear":
      await stores.clearEntries(call.store);
      return {};
    case "list": {
      const page = await stores.listEntries(call.store, now, {
        ...DATA_STORE_LIST_PAGE,
        ...(call.after === undefined ? {} : { after: call.after }),
        keysOnly: call.keysOnly === true,
      });
      const value: Record<string, Json> = { keys: page.entries.map((entry) => entry.key) };
      if (call.keysOnly !== true) value.values = page.entries.map((entry) => JSON.parse(entry.value) as Json);
      if (page.nextAfter !== undefined) value.next = page.nextAfter;
      return { value };
    }
  }
}

/**
 * What serves a run's calls to trusted code while it runs (`InvokeHandlers.dataStore` and
 * `dataStoreGrant`): the data stores bound to its props and, given `files`, that project's File
 * Store; undefined when the run has neither. The grant a Lambda host asks for is sealed only for a
 * run that can use one (a store is bound, or code that names `files` has a project, `mayUseFiles`):
 * sealing is a KMS call, and local hosts never ask, so they never pay the check either.
 */
export function runServices(
  deps: StoreDeps & Pick<Deps, "secrets" | "runtime">,
  invocation: { invocationId: string; timeoutMs: number },
  stores: ReadonlySet<string>,
  files?: { projectId: string; components: readonly { codeHash: string; code: string }[] },
): Pick<InvokeHandlers, "dataStore" | "dataStoreGrant"> | undefined {
  if (stores.size === 0 && files === undefined) return undefined;
  const { invocationId, timeoutMs } = invocation;
  return {
    dataStore: dataStoreService(deps, stores, files?.projectId),
    dataStoreGrant: async () =>
      stores.size > 0 || (files !== undefined && mayUseFiles(files.components))
        ? grantDataStores(deps, invocationId, stores, timeoutMs, files?.projectId)
        : undefined,
  };
}

// ---------------------------------------------------------------------------------------------
// Grants: the data store calls of a runtime that cannot message its host (a Lambda function).
// ---------------------------------------------------------------------------------------------

/** Path of the route that serves granted calls (`serve-data-store-call.ts`), below the public URL. */
export const DATA_STORE_CALLS_PATH = "/v1/data_store_calls";
/** A grant outlives its run's time limit by this much (the run's own clock and the host's differ). */
const GRANT_GRACE_MS = 10_000;
/**
 * A grant is `g1.<expiresAtMs>.<sealed body>`: the expiry in clear lets a malformed or expired
 * grant be refused before it is opened (on AWS, opening a grant this container has not seen costs
 * a KMS call); the sealed body repeats it, and a grant whose two expiries differ is not valid.
 */
const GRANT_FORMAT = /^g1\.(\d{1,15})\.([A-Za-z0-9_.-]+)$/;

interface GrantBody {
  v: 1;
  invocationId: string;
  stores: string[];
  /** The project whose File Store the run may reach. */
  project?: string;
  expiresAtMs: number;
}

/**
 * Seals a grant of `stores` for one run, good until its time limit (plus a grace): what a Lambda
 * runtime sends with each call (`DataStoreGrant`). Sealed with the `Secrets` port, whose ciphertext
 * is authenticated: a grant cannot be forged or changed, only used as it is until it expires.
 */
export async function grantDataStores(
  deps: Pick<Deps, "secrets" | "clock" | "runtime">,
  invocationId: string,
  stores: ReadonlySet<string>,
  timeoutMs: number,
  projectId?: string,
): Promise<{ url: string; grant: string }> {
  const body: GrantBody = {
    v: 1,
    invocationId,
    stores: [...stores],
    ...(projectId === undefined ? {} : { project: projectId }),
    expiresAtMs: deps.clock.nowMs() + timeoutMs + GRANT_GRACE_MS,
  };
  const url = `${deps.runtime.publicUrl.replace(/\/+$/, "")}${DATA_STORE_CALLS_PATH}`;
  return { url, grant: `g1.${body.expiresAtMs}.${await deps.secrets.seal(JSON.stringify(body))}` };
}

/** Grants opened, with the service of their run: one run's calls are counted and queued together (per container). */
const grantedRuns = new Map<string, { body: GrantBody; serve: (raw: unknown) => Promise<DataStoreReply> }>();
const GRANTED_RUNS_KEPT = 1000;

/**
 * Serves one call sent with a grant: refused when the grant does not open (forged, changed, of
 * another key) or has expired; otherwise as `dataStoreService` serves the run's calls, limited to
 * the grant's stores. Never rejects for what the caller sent.
 */
export async function serveGrantedCall(
  deps: StoreDeps & Pick<Deps, "secrets">,
  grant: string,
  call: unknown,
): Promise<DataStoreReply> {
  let run = grantedRuns.get(grant);
  if (!run) {
    // Refused before anything is opened: garbage and expired grants cost no decryption.
    const clear = GRANT_FORMAT.exec(grant);
    if (!clear) return refusal("the data store grant is not valid");
    const expiresAtMs = Number(clear[1]);
    if (deps.clock.nowMs() > expiresAtMs) return refusal("the data store grant has expired: its run has ended");
    const body = await openGrant(deps, clear[2] as string);
    if (!body || body.expiresAtMs !== expiresAtMs) return refusal("the data store grant is not valid");
    run = { body, serve: dataStoreService(deps, new Set(body.stores), body.project) };
    if (grantedRuns.size >= GRANTED_RUNS_KEPT) grantedRuns.delete(grantedRuns.keys().next().value as string);
    grantedRuns.set(grant, run);
  }
  if (deps.clock.nowMs() > run.body.expiresAtMs) return refusal("the data store grant has expired: its run has ended");
  return run.serve(call);
}

async function openGrant(deps: Pick<Deps, "secrets">, grant: string): Promise<GrantBody | undefined> {
  try {
    const body = JSON.parse(await deps.secrets.open(grant)) as Partial<GrantBody>;
    const valid =
      body.v === 1 &&
      typeof body.invocationId === "string" &&
      Array.isArray(body.stores) &&
      body.stores.every((store) => typeof store === "string") &&
      (body.project === undefined || typeof body.project === "string") &&
      typeof body.expiresAtMs === "number";
    return valid ? (body as GrantBody) : undefined;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// REST views.
// ---------------------------------------------------------------------------------------------

export interface DataStoreView {
  id: string;
  name: string;
  workspace_id: string;
  created_at: string;
}

export interface DataStoreRecordView {
  key: string;
  value: Json;
  /** When the record expires (ISO 8601), or null. */
  expires_at: string | null;
}

const storeView = (store: DataStoreRecord): DataStoreView => ({
  id: store.id,
  name: store.name,
  workspace_id: store.workspaceId,
  created_at: isoTime(store.createdAt),
});

const recordView = (entry: DataStoreEntry): DataStoreRecordView => ({
  key: entry.key,
  value: JSON.parse(entry.value) as Json,
  expires_at: entry.expiresAt === undefined ? null : isoTime(entry.expiresAt),
});

/** The data stores of a workspace the caller belongs to, by name. */
export async function listWorkspaceDataStores(
  deps: Pick<Deps, "identity" | "dataStores">,
  caller: Caller,
  workspaceId: string,
): Promise<{ data: DataStoreView[] }> {
  await requireWorkspace(deps, caller, workspaceId);
  return { data: (await deps.dataStores.listStores(workspaceId)).map(storeView) };
}

/** A page of a store's live records in key order; `after` is a key (decoded from its cursor). */
export async function listDataStoreRecords(
  deps: Pick<Deps, "identity" | "dataStores" | "clock">,
  caller: Caller,
  id: string,
  page: { limit: number; after?: string },
): Promise<{ data: DataStoreRecordView[]; page_info: PageInfo }> {
  const store = await requireDataStore(deps, caller, id);
  const now = deps.clock.nowMs();
  const [found, total] = await Promise.all([
    deps.dataStores.listEntries(store.id, now, {
      limit: page.limit,
      // Bytes of stored values, the bulk of a record view: the budget of every page (pagination.ts).
      maxBytes: PAGE_MAX_BYTES,
      ...(page.after === undefined ? {} : { after: page.after }),
    }),
    deps.dataStores.countEntries(store.id, now),
  ]);
  const first = found.entries[0];
  return {
    data: found.entries.map(recordView),
    page_info: {
      total_count: total,
      count: found.entries.length,
      start_cursor: first ? encodeCursor(first.key) : null,
      end_cursor: found.nextAfter === undefined ? null : encodeCursor(found.nextAfter),
    },
  };
}

/** Removes every record of a store of the caller's workspace, keeping the store. */
export async function clearDataStore(
  deps: Pick<Deps, "identity" | "dataStores">,
  caller: Caller,
  id: string,
): Promise<{ id: string; cleared: true }> {
  const store = await requireDataStore(deps, caller, id);
  await deps.dataStores.clearEntries(store.id);
  return { id: store.id, cleared: true };
}

/**
 * Deletes a store of the caller's workspace with its records. Props bound to it by id find it
 * gone (their calls fail); a prop bound by name creates it afresh, empty, on its next run.
 */
export async function deleteDataStore(
  deps: Pick<Deps, "identity" | "dataStores">,
  caller: Caller,
  id: string,
): Promise<{ id: string; deleted: true }> {
  const store = await requireDataStore(deps, caller, id);
  await deps.dataStores.deleteStore(store.id);
  return { id: store.id, deleted: true };
}
