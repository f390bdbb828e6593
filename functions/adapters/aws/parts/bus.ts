import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { SQSClient } from "@aws-sdk/client-sqs";
import { fallbackQueueNameFor } from "#config/shared-names";
import type { AwsPart } from "../composition.ts";
import { EventBridgeEventBus } from "../eventbridge-event-bus.ts";
import { lazy, required } from "../lazy-ports.ts";

/**
 * Publishing stored events on EventBridge (docs/aws.md), with the queue named after the bus for
 * entries EventBridge keeps refusing: functions that append events. Without the bus's name (a
 * function the stack did not attach as a publisher) publishing does nothing, as without the part.
 */
export const part: AwsPart = {
  name: "bus",
  build({ compute, log, client }) {
    if (!compute.eventBusName) return {};
    return {
      bus: lazy("the event bus", () => {
        const busName = required(compute.eventBusName, "the event bus", "the event bus's name");
        return new EventBridgeEventBus({
          eventBridge: client("eventbridge", () => new EventBridgeClient({})),
          busName,
          log,
          fallback: { sqs: client("sqs", () => new SQSClient({})), queue: { name: fallbackQueueNameFor(busName) } },
        });
      }),
    };
  },
};
