/**
 * Keys of the workflow items (workflows, their copies and guards, step states, runs) on the
 * resources table; docs/table-design.md ("Workflows") explains them. Same conventions as
 * `table-design.ts`, which re-exports them: generic `pk`/`sk` strings, `<KIND>#<id>`, adapters
 * never spell a key.
 */

/**
 * A free-form external id as a sort key part: `%` and `#` are percent-encoded so the key never
 * holds a `#` of the id's own, as `subscription-keys.ts` does with event names.
 */
function externalIdPart(externalId: string): string {
  return externalId.replaceAll("%", "%25").replaceAll("#", "%23");
}

export const workflowKeys = {
  /** A workflow record, with its internal `rev`; the items below are copies of it or guards. */
  workflow: (workflowId: string) => ({ pk: `WF#${workflowId}`, sk: "WF" }),
  workflowOfUser: (userId: string, workflowId: string) => ({ pk: `USER#${userId}`, sk: `WF#${workflowId}` }),
  workflowOfWorkspace: (workspaceId: string, workflowId: string) => ({
    pk: `WS#${workspaceId}`,
    sk: `WF#${workflowId}`,
  }),
  /**
   * Guard of an HTTP trigger's key and copy of its workflow: the hot path is one GetItem. Its own
   * partition, apart from the sources' `ENDPOINT#`, so neither store ever reads the other's items.
   */
  workflowEndpoint: (key: string) => ({ pk: `WFENDPOINT#${key}`, sk: "WFENDPOINT" }),
  /** Guard of an external id, unique within its workspace. */
  workflowExternalId: (workspaceId: string, externalId: string) => ({
    pk: `WS#${workspaceId}`,
    sk: `WFEXT#${externalIdPart(externalId)}`,
  }),
  /** A timer trigger of an active workflow, beside the sources' timers (`SRC#`) under `TIMERS`. */
  activeWorkflowTimer: (timerId: string) => ({ pk: "TIMERS", sk: `TI#${timerId}` }),
  /** One step's `$.service.db`, in its workflow's partition. */
  stepState: (workflowId: string, stepId: string) => ({ pk: `WF#${workflowId}`, sk: `STATE#${stepId}` }),
  /** One run, in its workflow's run partition (newest last: run ids sort by time). */
  workflowRun: (workflowId: string, runId: string) => ({ pk: `WFRUN#${workflowId}`, sk: `RUN#${runId}` }),
} as const;

/**
 * Whether DynamoDB accepts `key` (a partition key holds 2048 bytes, a sort key 1024). Lookups by
 * a value from a request (an HTTP key in a URL, a client's external id or run id) answer "none"
 * for a longer one instead of failing with a ValidationException.
 */
export function withinKeyLimits(key: { pk: string; sk: string }): boolean {
  return Buffer.byteLength(key.pk, "utf8") <= 2048 && Buffer.byteLength(key.sk, "utf8") <= 1024;
}

export const WORKFLOW_SORT_KEY_PREFIX = {
  /** Workflow copies in `USER#` and `WS#` partitions. */
  workflow: "WF#",
  timer: "TI#",
  stepState: "STATE#",
  run: "RUN#",
} as const;

/**
 * JSON of a workflow record. Core caps a workflow's configuration below this (design 2.4, 300 KB
 * as a source); each copy is one item, and a write puts at most 3 + (HTTP triggers) copies of it.
 */
export const MAX_STORED_WORKFLOW_BYTES = 300 * 1024;
/** JSON of one step's `$.service.db`, as a source's state. */
export const MAX_STORED_STEP_STATE_BYTES = 350 * 1024;
/** JSON of a run record; above it the adapter cuts the logs first (design 2.4). */
export const MAX_STORED_RUN_BYTES = 64 * 1024;
/**
 * A TransactWriteItems request holds at most 4 MB; a workflow write carrying more copies than
 * this is refused before it is sent (a 300 KB workflow with ten HTTP triggers would need 3.9 MB).
 */
export const MAX_WORKFLOW_TRANSACTION_BYTES = 3_800_000;
