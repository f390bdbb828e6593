import type { Page, PageQuery } from "#core/pagination";
import type { WorkflowRun } from "#core/workflow-model";

/** What {@link WorkflowRunStore.beginRun} found. */
export type BeginRunResult =
  /** The run is the caller's to run, as stored (with its `attempts`). */
  | { outcome: "started"; run: WorkflowRun }
  /** The run ended already: a repeated job, nothing to do. */
  | { outcome: "done" }
  /** Another runner holds it until `leaseUntilMs`; try again after it. */
  | { outcome: "busy"; leaseUntilMs: number };

/** How a run is begun. */
export interface BeginRunOptions {
  /**
   * The run's job is queued durably and runs again if this process dies before the run is recorded
   * (not a custom-response run, which answers its caller and is never queued). A store may then keep
   * the `running` record in memory until the run's finish writes it once, ended, as long as every
   * read answers as if it had been written at once: only a crash can tell, and the job run again
   * then begins the run as a first attempt (decision 462). The SQLite adapter does; DynamoDB,
   * where another runner may claim the run, writes at once.
   */
  rerunnable?: boolean;
}

/**
 * Runs of workflows: the once-only gate of a run (design 3.7) and its record. Adapters:
 * `SqliteWorkflowRunStore` (and, from step 2 of the design, a DynamoDB one); they pass
 * `test/contract/workflow-run-store.contract.ts`. Runs are kept as long as events (the adapter is
 * given the `EventRetention`: locally a sweep removes older runs, on DynamoDB its TTL).
 */
export interface WorkflowRunStore {
  /**
   * Claims a run, by `(run.workflowId, run.id)`. When none is stored, stores `run` as `running`
   * with `attempts: 1`: `started`. When a `running` one is stored whose lease ended before `nowMs`
   * (its runner died), replaces it by `run` with the stored `attempts + 1`: `started`. When a
   * `running` one still holds its lease: `busy`. When an ended one is stored: `done`, nothing written.
   */
  beginRun(run: WorkflowRun, nowMs: number, options?: BeginRunOptions): Promise<BeginRunResult>;
  /**
   * Records how a run ended (`run.status` is no longer `running`). Written only over the same
   * attempt still running: a run deleted meanwhile (with its workflow), ended, or taken over by
   * another attempt is left as it is.
   */
  finishRun(run: WorkflowRun): Promise<void>;
  getRun(workflowId: string, runId: string): Promise<WorkflowRun | undefined>;
  /** A workflow's runs, newest first by id (`slicePage` semantics). */
  listRuns(workflowId: string, page: PageQuery): Promise<Page<WorkflowRun>>;
  /** Removes every run of a workflow (its deletion). */
  deleteRuns(workflowId: string): Promise<void>;
}
