import type { Json, PauseKind } from "#runtime/protocol";

/**
 * How a pause was taken, by the first of: a request to its resume URL, to its cancel URL, or its
 * time coming (`due`: a delay or a rerun goes on, a suspension is cancelled). Set once; whoever
 * comes later finds it set and does nothing more (docs/workflows.md "Pausing a run").
 */
export interface PauseDispatch {
  how: "resume" | "cancel" | "due";
  /** Epoch ms it was taken: the time of the run id its continuation gets. */
  atMs: number;
  /** The request to the URL (`resume`, `cancel`), as the HTTP event of a trigger. */
  request?: Json;
  /** Webhook deliveries that led to the request (`x-sluice-hops`): its continuation carries them on. */
  hops?: number;
}

/**
 * A workflow run paused by `$.flow.suspend`, `$.flow.delay` or `$.flow.rerun` at the end of one of
 * its steps, with what its continuation needs.
 */
export interface PausedRun {
  /**
   * The run (`run_`) that paused: its record shows `paused`, and the continuation names it. A run
   * done again after a crash pauses again under the same id, replacing what its first try kept.
   */
  id: string;
  /** SHA-256 (hex) of the secret in the pause's URLs: a copy of the store does not give them. */
  tokenHash: string;
  workflowId: string;
  /**
   * The workflow's steps as the run paused (their ids, namespaces, components and whether they are
   * disabled), hashed: a continuation whose workflow's steps differ fails (a PUT of its triggers or
   * of the same steps keeps it).
   */
  stepsKey: string;
  /** The first run of the chain: `$.context.id` of every continuation. */
  originRunId: string;
  trigger: { type: "http" | "timer" | "event"; id: string };
  hops?: number;
  kind: PauseKind;
  /** The step that paused: a rerun runs it again; the others go on with the one after it. */
  stepId: string;
  /** Its namespace: a resumed suspension or delay exports `$resume_data` there. */
  stepNamespace: string;
  createdAt: number;
  /** When a delay or rerun goes on, or a suspension is cancelled, unless a URL comes first. */
  dueMs: number;
  /** `$.context.run.runs` of the continuation: the rerun step's next run, else 1. */
  runs: number;
  /** What the continuation starts from: the trigger event, the steps' exports, a rerun's context. */
  state: { event: Json; steps: Record<string, Json>; context?: Json };
  /** UTF-8 bytes of `state`'s JSON: counted in the workspace's stored bytes while the pause is kept. */
  stateBytes: number;
  dispatch?: PauseDispatch;
}

/**
 * Paused workflow runs, durably. Adapters: `SqlitePausedRuns` (local mode, polled by a driver:
 * {@link PolledPausedRunStore}) and a DynamoDB one with a one-time EventBridge Scheduler schedule
 * per pause (AWS). They pass `test/contract/paused-run-store.contract.ts`.
 */
export interface PausedRunStore {
  /** Resolves once the pause is durable and will come due at `dueMs`. */
  add(pause: PausedRun): Promise<void>;
  get(id: string): Promise<PausedRun | undefined>;
  /**
   * Takes the pause for `dispatch` unless it was taken already: resolves to the pause as stored
   * afterwards, whose `dispatch` is the one that won (`won`: this call's), or undefined when there
   * is no such pause.
   */
  dispatch(id: string, dispatch: PauseDispatch): Promise<{ pause: PausedRun; won: boolean } | undefined>;
  /**
   * Forgets a pause (its continuation ended); resolves to whether this call removed it (false when
   * there was none), so that of two removals at once only one takes its bytes back.
   */
  remove(id: string): Promise<boolean>;
  /** How many of a workflow's runs are paused. */
  countPending(workflowId: string): Promise<number>;
  /** Forgets every pause of a workflow (its deletion); resolves to their ids. */
  removeWorkflow(workflowId: string): Promise<string[]>;
  /** What a workflow's pauses keep: their `stateBytes` added up (0 when it has none). */
  stateBytesOf(workflowId: string): Promise<number>;
  /**
   * Notes that a taken pause's continuation was queued again at `atMs`, or waits until then (a
   * quota): a store that finds lost continuations itself leaves it alone until that long after
   * (local mode's sweep). Its dispatch is kept. On AWS, where schedules find them, it does nothing.
   */
  touch(id: string, atMs: number): Promise<void>;
}

/** A store that finds what is due by itself, for a driver that polls it (local mode). */
export interface PolledPausedRunStore extends PausedRunStore {
  /**
   * At most `limit` pauses, earliest first, that need a dispatch at `nowMs`: those not taken whose
   * `dueMs` has come, and those taken at `takenBeforeMs` or earlier that are still there (their
   * continuation was lost with a process: it is queued again, under the same run id).
   */
  due(nowMs: number, takenBeforeMs: number, limit: number): Promise<PausedRun[]>;
}
