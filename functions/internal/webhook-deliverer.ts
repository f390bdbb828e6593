/**
 * The webhook deliverer on AWS: consumes the FIFO delivery queue and the retry queue
 * (`#adapters/aws/sqs-delivery-queue`) and makes one attempt per delivery with `attemptDelivery`,
 * the same as local mode's worker, through `Http1WebhookSender` with private, loopback and
 * link-local addresses refused.
 *
 * - From the FIFO queue, a batch's messages of one group (one webhook) are attempted one after
 *   the other, in queue order; groups go in parallel.
 * - A failed attempt that is to be retried is sent to the retry queue, delayed until its next
 *   attempt is due, and its FIFO message is done: the webhook's next deliveries are not held up.
 * - From the retry queue, a delivery whose attempt is not due yet (waits over 15 minutes, SQS's
 *   longest delay) is sent back delayed again; a due one is attempted.
 * - A dead letter is stored by `attemptDelivery`; a delivery to a deleted webhook is dropped.
 *
 * Only a failure of Sluice itself (a store, the signing secret, the retry queue) fails a message
 * (`batchItemFailures`, with every later message of its group, so that order holds): SQS hands it
 * over again after the visibility timeout, with its attempts unchanged, and moves it to the queue's
 * dead-letter queue after 5 receives. A malformed message is logged and dropped.
 */
import type { SQSBatchResponse } from "aws-lambda";
import * as z from "zod";
import { Http1WebhookSender } from "#adapters/http1-webhook-sender";
import { ENV } from "#config/env";
import { jsonValueSchema } from "#core/json-value";
import type { Deps } from "#core/ports/deps";
import type { WebhookSender } from "#core/ports/webhook-sender";
import { type DeliveryRecord, storedDelivery } from "#core/subscription-model";
import {
  attemptDelivery,
  type DeliverySettings,
  deliveryLogFields,
  deliverySettings,
  logDeliveryOutcome,
} from "#core/webhook-delivery";
import { awsDepsLoader } from "./internal-handler.ts";

/** Where a delivery waits for its next attempt (`SqsDeliveryRetryQueue`). */
export interface RetryScheduler {
  /** Sends the delivery so that it comes back at its `nextAttemptAt` (or in 15 minutes, when later). */
  schedule(delivery: DeliveryRecord, now: number): Promise<void>;
}

/** A wait shorter than this is due: SQS delays count whole seconds. */
const DUE_WITHIN_MS = 1000;

const sqsRecordSchema = z.object({
  messageId: z.string(),
  body: z.string(),
  attributes: z.looseObject({ MessageGroupId: z.string().optional() }).optional(),
  eventSourceARN: z.string(),
});
type SqsRecord = z.infer<typeof sqsRecordSchema>;
const sqsEventSchema = z.object({ Records: z.array(sqsRecordSchema) });

const stringMap = z.record(z.string(), z.string());
const deliveryTargetSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("webhook"), webhookId: z.string().startsWith("wh_") }),
  z.object({
    kind: z.literal("http"),
    workflowId: z.string().startsWith("p_"),
    request: z.object({
      method: z.string(),
      url: z.string(),
      headers: stringMap.optional(),
      params: stringMap.optional(),
      auth: z.object({ username: z.string(), password: z.string() }).optional(),
      data: jsonValueSchema.optional(),
    }),
  }),
  z.object({
    kind: z.literal("s3"),
    workflowId: z.string().startsWith("p_"),
    bucket: z.string(),
    key: z.string(),
    body: jsonValueSchema,
  }),
]);

/**
 * A message body: a `DeliveryRecord`, or one queued by a version before workflows (a top-level
 * `webhookId`, no `target`), read as a webhook delivery (`storedDelivery`).
 */
export const deliveryRecordSchema = z
  .object({
    id: z.string().startsWith("dlv_"),
    target: deliveryTargetSchema.optional(),
    webhookId: z.string().startsWith("wh_").optional(),
    subscriptionIds: z.array(z.string()),
    emitterId: z.string(),
    eventId: z.string(),
    channel: z.string(),
    payload: jsonValueSchema,
    attempts: z.number().int().min(0),
    nextAttemptAt: z.number(),
    createdAt: z.number(),
    lastError: z.string().optional(),
    hops: z.number().int().min(0).optional(),
  })
  .refine((record) => record.target !== undefined || record.webhookId !== undefined, {
    error: "a delivery has a target (or, queued by an older version, a webhookId)",
  })
  .transform((record) => storedDelivery<DeliveryRecord>(record as Parameters<typeof storedDelivery>[0]));

/** FIFO queue ARNs end in `.fifo`; the retry queue is a standard queue. */
const fromFifo = (record: SqsRecord) => record.eventSourceARN.endsWith(".fifo");

export interface WebhookDelivererOptions {
  /** @default the AWS composition root */
  readonly loadDeps?: () => Promise<Deps>;
  /** @default Http1WebhookSender with private addresses refused */
  readonly sender?: WebhookSender;
  /** @default SqsDeliveryRetryQueue on `SLUICE_DELIVERY_RETRY_QUEUE_URL` */
  readonly retryQueue?: () => Promise<RetryScheduler>;
  /** @default DEFAULT_DELIVERY_SETTINGS */
  readonly settings?: Partial<DeliverySettings>;
}

/** The retry queue of the deployed function, built on first use (the SDK loads only then). */
async function awsRetryQueue(): Promise<RetryScheduler> {
  const [{ SQSClient }, { SqsDeliveryRetryQueue }, { loadAwsComputeConfig }] = await Promise.all([
    import("@aws-sdk/client-sqs"),
    import("#adapters/aws/sqs-delivery-queue"),
    import("#config/aws-compute-env"),
  ]);
  const queueUrl = loadAwsComputeConfig().deliveryRetryQueueUrl;
  if (!queueUrl) throw new Error("the retry queue is not available: this function was deployed without its URL");
  return new SqsDeliveryRetryQueue({ sqs: new SQSClient({}), queueUrl });
}

function once<T>(build: () => Promise<T>): () => Promise<T> {
  let built: Promise<T> | undefined;
  return () => {
    built ??= build().catch((error: unknown) => {
      built = undefined;
      throw error;
    });
    return built;
  };
}

/** The deliverer's entry with its dependencies given (tests); {@link handler} builds the AWS ones. */
export function createWebhookDelivererHandler(options: WebhookDelivererOptions = {}) {
  // It reads webhooks, opens their secrets and writes `$.send.s3` objects (lib/constructs/event-fanout.ts).
  const loadDeps =
    options.loadDeps ??
    awsDepsLoader({
      objects: () => import("#adapters/aws/parts/objects"),
      secrets: () => import("#adapters/aws/parts/secrets"),
      tables: () => import("#adapters/aws/parts/tables"),
    });
  // Private, loopback and metadata addresses are refused, as in local mode by default. The stack
  // never sets SLUICE_WEBHOOK_ALLOW_PRIVATE (service-stack.test.ts checks); the offline deployment test
  // does, to deliver to its receiver on 127.0.0.1.
  const sender =
    options.sender ??
    new Http1WebhookSender({ allowPrivateAddresses: process.env[ENV.webhookAllowPrivate] === "true" });
  const retryQueue = once(options.retryQueue ?? awsRetryQueue);
  const settings = deliverySettings(options.settings);

  /** True when the message is done with; false when Sluice failed and SQS should hand it over again. */
  async function deliver(deps: Deps, record: SqsRecord): Promise<boolean> {
    let delivery: DeliveryRecord;
    try {
      delivery = deliveryRecordSchema.parse(JSON.parse(record.body));
    } catch (error) {
      deps.log.error("malformed webhook delivery dropped", { message_id: record.messageId, error: String(error) });
      return true;
    }
    try {
      const now = deps.clock.nowMs();
      if (!fromFifo(record) && delivery.nextAttemptAt - now >= DUE_WITHIN_MS) {
        await (await retryQueue()).schedule(delivery, now);
        return true;
      }
      const outcome = await attemptDelivery(deps, sender, delivery, now, settings);
      if (outcome.kind === "retry") {
        await (await retryQueue()).schedule(
          { ...delivery, attempts: outcome.attempts, nextAttemptAt: outcome.at, lastError: outcome.error },
          deps.clock.nowMs(),
        );
      }
      logDeliveryOutcome(deps.log, delivery, outcome);
      return true;
    } catch (error) {
      deps.log.error("webhook delivery could not be attempted; SQS hands it over again", {
        ...deliveryLogFields(delivery),
        error: String(error),
      });
      return false;
    }
  }

  return async function handler(event: unknown): Promise<SQSBatchResponse> {
    const deps = await loadDeps();
    const parsed = sqsEventSchema.safeParse(event);
    if (!parsed.success) {
      deps.log.error("malformed SQS event dropped", { issues: parsed.error.issues });
      return { batchItemFailures: [] };
    }
    const groups = new Map<string, SqsRecord[]>();
    const retries: SqsRecord[] = [];
    for (const record of parsed.data.Records) {
      if (!fromFifo(record)) {
        retries.push(record);
        continue;
      }
      const group = record.attributes?.MessageGroupId ?? "";
      const list = groups.get(group);
      if (list) list.push(record);
      else groups.set(group, [record]);
    }
    const failed: string[] = [];
    await Promise.all([
      ...[...groups.values()].map(async (records) => {
        for (const [index, record] of records.entries()) {
          if (await deliver(deps, record)) continue;
          // FIFO: the later messages of the group must not go before this one.
          failed.push(...records.slice(index).map((later) => later.messageId));
          return;
        }
      }),
      ...retries.map(async (record) => {
        if (!(await deliver(deps, record))) failed.push(record.messageId);
      }),
    ]);
    return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
  };
}

export const handler = createWebhookDelivererHandler();
