/**
 * The DynamoDB table design, shared by the adapters, the stateful CDK stack and the test
 * harness that creates tables in DynamoDB Local, so the three cannot disagree.
 * docs/table-design.md explains it.
 */

import { RESOURCES_TABLE } from "#config/shared-names";

export {
  MAX_STORED_RUN_BYTES,
  MAX_STORED_STEP_STATE_BYTES,
  MAX_STORED_WORKFLOW_BYTES,
  MAX_WORKFLOW_TRANSACTION_BYTES,
  WORKFLOW_SORT_KEY_PREFIX,
  workflowKeys,
} from "./workflow-keys.ts";

const eventPartition = (sourceId: string, channel: string) => `EVT#${sourceId}#${channel}`;

/** Key builders: the only place item keys are spelled. */
export const resourceKeys = {
  user: (userId: string) => ({ pk: `USER#${userId}`, sk: "USER" }),
  username: (username: string) => ({ pk: `USERNAME#${username}`, sk: "USERNAME" }),
  apiKey: (hash: string) => ({ pk: `APIKEY#${hash}`, sk: "APIKEY" }),
  workspace: (workspaceId: string) => ({ pk: `WS#${workspaceId}`, sk: "WS" }),
  /** The membership as seen from the workspace. */
  member: (workspaceId: string, userId: string) => ({ pk: `WS#${workspaceId}`, sk: `MEMBER#${userId}` }),
  /** The same membership as seen from the user, so "my workspaces" is one Query. */
  membershipOfUser: (userId: string, workspaceId: string) => ({ pk: `USER#${userId}`, sk: `WS#${workspaceId}` }),
  project: (workspaceId: string, projectId: string) => ({ pk: `WS#${workspaceId}`, sk: `PROJ#${projectId}` }),
  workspaceCounter: () => ({ pk: "COUNTER", sk: "WORKSPACE_NUMBER" }),
  usage: (ownerId: string, day: string) => ({ pk: `USAGE#${ownerId}`, sk: `DAY#${day}` }),
  /** What a workspace's sources stored on one UTC day (by the time of their append), less what was removed since. */
  storedUsage: (ownerId: string, day: string) => ({ pk: `USAGE#${ownerId}`, sk: `STORED#${day}` }),
  /** The workspace a source's stored events count toward; kept after the source is deleted. */
  storedOwner: (sourceId: string) => ({ pk: `STOREDSRC#${sourceId}`, sk: "OWNER" }),
  /** A short-lived counter (runs of a minute, a notice of an hour), expired by TTL. */
  usageWindow: (key: string, windowStartMs: number) => ({ pk: `WINDOW#${key}`, sk: `AT#${windowStartMs}` }),

  /** A saved component; `code` is stored gzipped (see `MAX_STORED_COMPONENT_BYTES`). */
  component: (componentId: string) => ({ pk: `COMP#${componentId}`, sk: "COMP" }),
  /** One pointer per component that declares a key: the newest is the last sort key. */
  componentByKey: (ownerId: string, key: string, componentId: string) => ({
    pk: `COMPKEY#${ownerId}#${key}`,
    sk: `COMP#${componentId}`,
  }),

  /** A deployed source; the items below are copies of it or guards, written in one transaction. */
  source: (sourceId: string) => ({ pk: `SRC#${sourceId}`, sk: "SRC" }),
  sourceOfUser: (userId: string, sourceId: string) => ({ pk: `USER#${userId}`, sk: `SRC#${sourceId}` }),
  sourceOfWorkspace: (workspaceId: string, sourceId: string) => ({ pk: `WS#${workspaceId}`, sk: `SRC#${sourceId}` }),
  /** Guard of a name slug: slugs are unique per user, and one Query finds `slug`, `slug-1`, ... */
  sourceSlug: (userId: string, slug: string) => ({ pk: `USER#${userId}`, sk: `SLUG#${slug}` }),
  /** Guard of an HTTP endpoint key and copy of its source: the hot path is one GetItem. */
  endpoint: (endpointKey: string) => ({ pk: `ENDPOINT#${endpointKey}`, sk: "ENDPOINT" }),
  /** Copy of every active source with a timer, in one collection. */
  activeTimer: (sourceId: string) => ({ pk: "TIMERS", sk: `SRC#${sourceId}` }),
  sourceState: (sourceId: string) => ({ pk: `SRC#${sourceId}`, sk: "STATE" }),
  /**
   * Copy of every source whose deploy has not finished, in one collection ordered by when the
   * deploy began, so the recovery sweep finds those begun before a time with one Query.
   */
  deployingSource: (startedAtMs: number, sourceId: string) => ({
    pk: "DEPLOYING",
    sk: `${deployingSortKeyBefore(startedAtMs)}#${sourceId}`,
  }),
  /** A user's `Idempotency-Key` and the source its create made (expired by TTL after 24 h). */
  deployClaim: (userId: string, key: string) => ({ pk: `DEPLOYKEY#${userId}`, sk: `KEY#${key}` }),
  /** The lease of a source whose runs go one at a time (a `$.service.db` source), while one runs. */
  sourceRunLock: (sourceId: string) => ({ pk: `SRC#${sourceId}`, sk: "RUNLOCK" }),

  /** A data store; `entries` counts its records (expired ones until they are removed). */
  dataStore: (storeId: string) => ({ pk: `DS#${storeId}`, sk: "DS" }),
  /** Guard of a store's name (unique per workspace) and copy of the store, so a workspace's stores are one Query. */
  dataStoreName: (workspaceId: string, name: string) => ({ pk: `WS#${workspaceId}`, sk: `DSNAME#${name}` }),
  /** One partition per data store, its records in key order. */
  dataStoreEntries: (storeId: string) => `DSREC#${storeId}`,
  dataStoreEntry: (storeId: string, key: string) => ({ pk: `DSREC#${storeId}`, sk: `K#${key}` }),

  /** A connected account (`AppAccountRecord`; its token expiry is `tokenExpiresAtMs`, not the TTL attribute). */
  appAccount: (accountId: string) => ({ pk: `ACCT#${accountId}`, sk: "ACCT" }),
  /** Copy of an account under its workspace, so a workspace's accounts are one Query, by id. */
  appAccountOfWorkspace: (workspaceId: string, accountId: string) => ({
    pk: `WS#${workspaceId}`,
    sk: `ACCT#${accountId}`,
  }),
  /**
   * The index of accounts by token expiry, across workspaces (the background refresh): one item
   * per healthy account with a `tokenExpiresAtMs`, in one partition, `sk` the expiry zero-padded to 15
   * digits and the id, written in the transactions that write the account.
   */
  appAccountExpiries: "ACCTEXPIRY",
  appAccountExpiry: (expiresAtMs: number, accountId: string) => ({
    pk: "ACCTEXPIRY",
    sk: `${appAccountExpirySortPrefix(expiresAtMs)}#${accountId}`,
  }),
  /** An OAuth authorization in progress, by its `state`; removed by the table's TTL once expired. */
  pendingConnect: (state: string) => ({ pk: `OAUTHSTATE#${state}`, sk: "STATE" }),

  /**
   * A delayed emit waiting for its time: a small index item per emit (`IN#<event sort key of its
   * $in id>`, its due time), so counting and cancelling a range read little, and its body (`BODY#`:
   * channel, event, meta), read only to deliver it. One partition per source.
   */
  delayedEmits: (sourceId: string) => `DLY#${sourceId}`,
  delayedEmit: (sourceId: string, ms: number, n: number) => ({
    pk: `DLY#${sourceId}`,
    sk: `IN#${eventSortKey(ms, n)}`,
  }),
  delayedEmitBody: (sourceId: string, ms: number, n: number) => ({
    pk: `DLY#${sourceId}`,
    sk: `BODY#${eventSortKey(ms, n)}`,
  }),

  /**
   * A paused workflow run (`PausedRunStore`), by its run id: its record as JSON text and, once
   * taken, its dispatch. A pause's URLs name only the run, so its item is found by the run alone.
   */
  pausedRun: (runId: string) => ({ pk: `PAUSE#${runId}`, sk: "PAUSE" }),
  /**
   * One small index item per pause in its workflow's partition (`RUN#<run id>`), so that counting
   * and deleting a workflow's pauses read no record. Written and deleted with the pause.
   */
  pausedRunsOfWorkflow: (workflowId: string) => `PAUSES#${workflowId}`,
  pausedRunOfWorkflow: (workflowId: string, runId: string) => ({
    pk: `PAUSES#${workflowId}`,
    sk: `RUN#${runId}`,
  }),

  /** Last event id handed out for a source, and the channels it has events in. */
  eventSequence: (sourceId: string) => ({ pk: `EVTSEQ#${sourceId}`, sk: "EVTSEQ" }),
  /** One partition per source and channel (`""` is the default channel). */
  eventPartition,
  event: (sourceId: string, channel: string, ms: number, n: number) => ({
    pk: eventPartition(sourceId, channel),
    sk: `EVT#${eventSortKey(ms, n)}`,
  }),
} as const;

/** The sort key every deploying copy begun before `ms` sorts below (and those begun at or after it above). */
export function deployingSortKeyBefore(ms: number): string {
  return `AT#${String(ms).padStart(15, "0")}`;
}

export const SORT_KEY_PREFIX = {
  membershipOfUser: "WS#",
  project: "PROJ#",
  source: "SRC#",
  slug: "SLUG#",
  component: "COMP#",
  event: "EVT#",
  storedUsage: "STORED#",
  dataStoreName: "DSNAME#",
  dataStoreEntry: "K#",
  delayedEmit: "IN#",
  pausedRunOfWorkflow: "RUN#",
  appAccount: "ACCT#",
} as const;

/**
 * The start of an expiry index item's sort key: the epoch ms zero-padded to 15 digits, so string
 * order is time order, and every key of an earlier expiry sorts below this one alone.
 */
export function appAccountExpirySortPrefix(expiresAtMs: number): string {
  return String(expiresAtMs).padStart(15, "0");
}

/**
 * The part of an event's sort key after `EVT#`: `ms` zero-padded to 15 digits, `-`, `n` padded to
 * 9, so string order is (ms, n) numeric order. The public id `<ms>-<n>` is unpadded.
 */
export function eventSortKey(ms: number, n: number): string {
  return `${String(ms).padStart(15, "0")}-${String(n).padStart(9, "0")}`;
}

/**
 * Size limits that keep every item under DynamoDB's 400 KB. Above them the adapters refuse the
 * write with `payload_too_large` before sending anything; the core caps sizes below them, so this
 * is a safety net. Sizes are UTF-8 bytes of the stored form.
 */
/** JSON of one event's `event` (stored as a string attribute). */
export const MAX_STORED_EVENT_BYTES = 256 * 1024;
/** JSON of one event's `meta` (stored as a string attribute). */
export const MAX_STORED_EVENT_META_BYTES = 32 * 1024;
/** Gzipped `code` plus the JSON of the rest of the component (metadata, name, URL, ...). */
export const MAX_STORED_COMPONENT_BYTES = 390 * 1024;
/** JSON of a source record (each of its copies is one item). */
export const MAX_STORED_SOURCE_BYTES = 300 * 1024;
/** JSON of a source's `db` plus its dedupe memory. */
export const MAX_STORED_STATE_BYTES = 350 * 1024;

/** CreateTable input for DynamoDB Local; the stateful stack declares the same keys with TableV2. */
export function resourcesTableCreateInput(tableName: string) {
  return {
    TableName: tableName,
    BillingMode: "PAY_PER_REQUEST" as const,
    AttributeDefinitions: [
      { AttributeName: RESOURCES_TABLE.partitionKey, AttributeType: "S" as const },
      { AttributeName: RESOURCES_TABLE.sortKey, AttributeType: "S" as const },
    ],
    KeySchema: [
      { AttributeName: RESOURCES_TABLE.partitionKey, KeyType: "HASH" as const },
      { AttributeName: RESOURCES_TABLE.sortKey, KeyType: "RANGE" as const },
    ],
  };
}
