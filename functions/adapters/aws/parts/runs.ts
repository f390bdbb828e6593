import { LambdaClient } from "@aws-sdk/client-lambda";
import type { AwsPart } from "../composition.ts";
import { LambdaRunQueue } from "../lambda-run-queue.ts";
import { lazy, required } from "../lazy-ports.ts";

/** The run queue (an asynchronous invoke of the source runner): functions that queue runs. */
export const part: AwsPart = {
  name: "runs",
  build({ compute, client }) {
    return {
      runs: lazy(
        "the run queue",
        () =>
          new LambdaRunQueue({
            lambda: client("lambda", () => new LambdaClient({})),
            functionName: required(compute.sourceRunnerFunction, "the run queue", "the source runner's name"),
          }),
      ),
    };
  },
};
