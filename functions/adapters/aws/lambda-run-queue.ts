/**
 * `RunQueue` on AWS: an asynchronous `Invoke` (`InvocationType: "Event"`) of the source-runner
 * function (`functions/internal/source-runner.ts`), which calls `runQueuedJob` (a source's job or a
 * workflow's, with its run id). Lambda keeps the job in its own queue and retries a failed run
 * twice (a workflow run another runner still holds fails, so it is retried later), so a job runs at
 * least once.
 */
import { InvokeCommand, type LambdaClient } from "@aws-sdk/client-lambda";
import type { RunJob, RunQueue } from "#core/ports/run-queue";

/** Lambda's limit on the payload of an asynchronous invocation. */
export const MAX_ASYNC_PAYLOAD_BYTES = 1024 * 1024;

export interface LambdaRunQueueOptions {
  readonly lambda: LambdaClient;
  /** Name or ARN of the source-runner function (`SLUICE_SOURCE_RUNNER_FUNCTION`). */
  readonly functionName: string;
}

export class LambdaRunQueue implements RunQueue {
  readonly #options: LambdaRunQueueOptions;

  constructor(options: LambdaRunQueueOptions) {
    this.#options = options;
  }

  async enqueue(job: RunJob): Promise<void> {
    const payload = new TextEncoder().encode(JSON.stringify(job));
    if (payload.length > MAX_ASYNC_PAYLOAD_BYTES) {
      throw new Error(`a run job of ${payload.length} bytes is larger than Lambda's ${MAX_ASYNC_PAYLOAD_BYTES} bytes`);
    }
    await this.#options.lambda.send(
      new InvokeCommand({ FunctionName: this.#options.functionName, InvocationType: "Event", Payload: payload }),
    );
  }
}
