/**
 * `EventPurger` on AWS: an asynchronous `Invoke` (`InvocationType: "Event"`) of the event-purger
 * function (`functions/internal/event-purger.ts`), which calls `EventStore.purgeDeletedEvents`.
 * Lambda queues the job and retries a failed purge twice; the purge is idempotent.
 */
import { InvokeCommand, type LambdaClient } from "@aws-sdk/client-lambda";
import type { EventPurger } from "#core/ports/event-purger";

export interface LambdaEventPurgerOptions {
  readonly lambda: LambdaClient;
  /** Name or ARN of the event-purger function (`SLUICE_EVENT_PURGER_FUNCTION`). */
  readonly functionName: string;
}

export class LambdaEventPurger implements EventPurger {
  readonly #options: LambdaEventPurgerOptions;

  constructor(options: LambdaEventPurgerOptions) {
    this.#options = options;
  }

  /** Resolves once Lambda has queued the purge (202), not when it has run. */
  async purgeLater(sourceId: string): Promise<void> {
    await this.#options.lambda.send(
      new InvokeCommand({
        FunctionName: this.#options.functionName,
        InvocationType: "Event",
        Payload: new TextEncoder().encode(JSON.stringify({ sourceId })),
      }),
    );
  }
}
