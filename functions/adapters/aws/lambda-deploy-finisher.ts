/**
 * `DeployFinisher` on AWS: an asynchronous `Invoke` (`InvocationType: "Event"`) of the deploy
 * finisher function (`functions/internal/deploy-finisher.ts`) with `{"sourceId": ...}`. Lambda
 * queues the job; the stack sets no retries (a retry could run a hook twice) and a maximum age,
 * so the finisher starts well before the recovery sweep could take the source (docs/aws.md
 * "Deploy time budget").
 */
import { InvokeCommand, type LambdaClient } from "@aws-sdk/client-lambda";
import type { DeployFinisher } from "#core/ports/deploy-finisher";

export interface LambdaDeployFinisherOptions {
  readonly lambda: LambdaClient;
  /** Name or ARN of the deploy finisher function (`SLUICE_DEPLOY_FINISHER_FUNCTION`). */
  readonly functionName: string;
}

export class LambdaDeployFinisher implements DeployFinisher {
  readonly #options: LambdaDeployFinisherOptions;

  constructor(options: LambdaDeployFinisherOptions) {
    this.#options = options;
  }

  /** Resolves once Lambda has queued the job (202), not when the deploy is finished. */
  async finishLater(sourceId: string): Promise<void> {
    await this.#options.lambda.send(
      new InvokeCommand({
        FunctionName: this.#options.functionName,
        InvocationType: "Event",
        Payload: new TextEncoder().encode(JSON.stringify({ sourceId })),
      }),
    );
  }
}
