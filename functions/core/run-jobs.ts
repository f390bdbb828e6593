/**
 * The one entry of queued runs, on both platforms (`SqliteRunQueue` locally, the source-runner
 * function on AWS): a source's job to `runSource`, a workflow's to `runWorkflow`.
 */
import type { Deps } from "#core/ports/deps";
import type { RunJob } from "#core/ports/run-queue";
import { runSource } from "./source-runs.ts";
import { runWorkflow } from "./workflow-runs.ts";

/** Runs one queued job. Throws `RunBusyError` when a workflow run is held by another runner. */
export function runQueuedJob(deps: Deps, job: RunJob): Promise<unknown> {
  return job.kind === "workflow" ? runWorkflow(deps, job) : runSource(deps, job);
}
