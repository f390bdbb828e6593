/**
 * Finishing deploys in the background: the steps of `POST /v1/sources` and `PUT /v1/sources/{id}`
 * (and of the sources workflows' triggers deploy, activate or deactivate) that the request could not fit in the time it had left before it must answer (the source's
 * function, its `deploy` and `activate` hooks, an update's previous `deactivate`; docs/aws.md
 * "Deploy time budget"), and a deletion's `deactivate` hook (`DELETE` routes; then the source is
 * removed). The source is saved and marked
 * (`deployingSince`, `deployStep`) before the hand-over, and the finisher goes on from that step
 * (`finishDeploy` in #core/sources). Adapter: `LambdaDeployFinisher` (AWS: an asynchronous
 * `Invoke` of the deploy finisher function). Local mode has none: its requests have no deadline,
 * so every deploy finishes in its request.
 */
export interface DeployFinisher {
  /** Resolves once the job is queued (on AWS, Lambda's 202), not when the deploy is finished. */
  finishLater(sourceId: string): Promise<void>;
}
