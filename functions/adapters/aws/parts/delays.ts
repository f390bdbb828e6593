import { SchedulerClient } from "@aws-sdk/client-scheduler";
import { systemClock } from "#core/ports/clock";
import type { AwsPart } from "../composition.ts";
import { documentClient } from "../dynamodb-client.ts";
import { DynamoDbDelayedEmits } from "../dynamodb-delayed-emits.ts";
import { lazy } from "../lazy-ports.ts";
import { SchedulerDelayedEmits } from "../scheduler-delayed-emits.ts";

/**
 * Delayed emits (`$emit` with `delivery_ts`): rows on the resources table and one-time schedules
 * (docs/aws.md "Delayed emits on AWS"). Functions that apply runs schedule them, those that delete
 * `$in` events or sources cancel them, and the deliverer reads and forgets them; the stack gives
 * each the schedule settings it needs (lib/constructs/source-compute.ts).
 */
export const part: AwsPart = {
  name: "delays",
  build({ compute, table, client, log }) {
    return {
      delayedEmits: lazy(
        "the delayed emits",
        () =>
          new SchedulerDelayedEmits({
            rows: new DynamoDbDelayedEmits(
              client("dynamodb", () => documentClient()),
              table(),
            ),
            scheduler: client("scheduler", () => new SchedulerClient({})),
            ...(compute.delayedEmits ? { groupName: compute.delayedEmits.scheduleGroup } : {}),
            ...(compute.delayedEmits?.target ? { target: compute.delayedEmits.target } : {}),
            clock: systemClock,
            log,
          }),
      ),
    };
  },
};
