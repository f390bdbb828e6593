import { SchedulerClient } from "@aws-sdk/client-scheduler";
import { systemClock } from "#core/ports/clock";
import type { AwsPart } from "../composition.ts";
import { documentClient } from "../dynamodb-client.ts";
import { DynamoDbPausedRuns } from "../dynamodb-paused-runs.ts";
import { lazy } from "../lazy-ports.ts";
import { SchedulerPausedRuns } from "../scheduler-paused-runs.ts";

/**
 * Paused workflow runs (`$.flow.suspend`, `delay`, `rerun`): rows on the resources table and one
 * one-time schedule per pause (docs/aws.md "Paused workflow runs on AWS"). Functions that run
 * workflows pause them and forget them once their continuation ended, the endpoint function
 * answers their URLs, the dispatcher takes them when their time comes, and the routes that delete
 * a workflow forget its pauses; the stack gives each the schedule settings it needs
 * (lib/constructs/source-compute.ts).
 */
export const part: AwsPart = {
  name: "pauses",
  build({ compute, table, client, log }) {
    return {
      pausedRuns: lazy(
        "the paused runs",
        () =>
          new SchedulerPausedRuns({
            rows: new DynamoDbPausedRuns(
              client("dynamodb", () => documentClient()),
              table(),
            ),
            scheduler: client("scheduler", () => new SchedulerClient({})),
            ...(compute.pausedRuns ? { groupName: compute.pausedRuns.scheduleGroup } : {}),
            ...(compute.pausedRuns?.target ? { target: compute.pausedRuns.target } : {}),
            clock: systemClock,
            log,
          }),
      ),
    };
  },
};
