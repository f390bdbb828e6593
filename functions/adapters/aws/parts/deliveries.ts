import { SQSClient } from "@aws-sdk/client-sqs";
import type { AwsPart } from "../composition.ts";
import { lazy, required } from "../lazy-ports.ts";
import { SqsDeliveryQueue } from "../sqs-delivery-queue.ts";

/** Queueing webhook deliveries (the SQS FIFO delivery queue): functions that queue deliveries. */
export const part: AwsPart = {
  name: "deliveries",
  build({ compute, client }) {
    return {
      deliveries: lazy(
        "the delivery queue",
        () =>
          new SqsDeliveryQueue({
            sqs: client("sqs", () => new SQSClient({})),
            queueUrl: required(
              compute.deliveryQueueUrl,
              "the delivery queue",
              "the delivery queue's URL (access.deliveries)",
            ),
          }),
      ),
    };
  },
};
