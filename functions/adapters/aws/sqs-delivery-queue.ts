/**
 * Webhook deliveries on AWS, in two SQS queues (docs/aws.md, "Subscriptions and webhook delivery
 * on AWS"):
 *
 * - {@link SqsDeliveryQueue} (`DeliveryQueue`): the FIFO delivery queue, fed by the dispatcher and
 *   by dead-letter replays. One message group per destination (a webhook, or a workflow for its sends), so the webhook deliverer receives a
 *   webhook's deliveries one at a time, in the order they were queued, while webhooks go ahead in
 *   parallel.
 * - {@link SqsDeliveryRetryQueue}: the standard retry queue. A failed attempt is sent there with a
 *   delay (SQS delays a message 15 minutes at most; a longer wait is made of several delays), so it
 *   waits outside its webhook's group and the deliveries queued after it are not held up.
 *
 * A message body is the `DeliveryRecord` as JSON.
 */
import { setTimeout as sleepFor } from "node:timers/promises";
import {
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  SendMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { SQS_MAX_MESSAGE_BYTES } from "#config/shared-names";
import type { DeliveryQueue } from "#core/ports/delivery-queue";
import { type DeliveryRecord, destinationOf } from "#core/subscription-model";
import { consecutiveBatches } from "./batches.ts";

/** SQS's limit of entries per `SendMessageBatch`; a batch's total size has the same limit as one message. */
export const MAX_BATCH_ENTRIES = 10;
/** SQS's longest `DelaySeconds`. */
export const MAX_DELAY_SECONDS = 900;

/**
 * The FIFO deduplication id of one enqueue of a delivery: its id and when it is due. The same
 * delivery queued twice for the same time (a repeated dispatch, whose deliveries are identical) is
 * kept once within SQS's 5-minute window; a replay is due at the time of the replay, so it is never
 * taken for the earlier enqueue of its delivery.
 */
export const deduplicationIdOf = (delivery: DeliveryRecord) => `${delivery.id}-${delivery.nextAttemptAt}`;

/** `DelaySeconds` for an attempt due at `at` (epoch ms), at `now`: whole seconds, up to 15 minutes. */
export function delaySecondsUntil(at: number, now: number): number {
  return Math.min(MAX_DELAY_SECONDS, Math.max(0, Math.ceil((at - now) / 1000)));
}

export interface SqsDeliveryQueueOptions {
  readonly sqs: SQSClient;
  /** URL of the FIFO delivery queue (`SLUICE_DELIVERY_QUEUE_URL`). */
  readonly queueUrl: string;
  /** Tries of a batch entry SQS refused, the first included. @default 3 */
  readonly maxAttempts?: number;
  /** Pause before try n (2, 3, ...). @default 100 ms × 4^(n-2) */
  readonly backoffMs?: (attempt: number) => number;
  /** @default node:timers/promises setTimeout */
  readonly sleep?: (ms: number) => Promise<unknown>;
}

interface Message {
  entry: SendMessageBatchRequestEntry;
  bytes: number;
}

export class SqsDeliveryQueue implements DeliveryQueue {
  readonly #options: SqsDeliveryQueueOptions;

  constructor(options: SqsDeliveryQueueOptions) {
    this.#options = options;
  }

  /**
   * Sends the deliveries in order, in batches of at most 10. Resolves when SQS has stored every
   * one; rejects, having sent what it could, when a delivery is too large or SQS still refuses an
   * entry after the last try (a repeated enqueue of the same deliveries is deduplicated).
   */
  async enqueue(deliveries: readonly DeliveryRecord[]): Promise<void> {
    const messages = deliveries.map((delivery): Message => {
      const body = JSON.stringify(delivery);
      return {
        entry: {
          Id: "",
          MessageBody: body,
          MessageGroupId: destinationOf(delivery),
          MessageDeduplicationId: deduplicationIdOf(delivery),
        },
        bytes: Buffer.byteLength(body, "utf8"),
      };
    });
    // Nothing is sent when one delivery can never be: the caller's retry would fail the same way.
    const oversized = messages.findIndex((message) => message.bytes > SQS_MAX_MESSAGE_BYTES);
    if (oversized >= 0) {
      throw new Error(
        `delivery ${deliveries[oversized]?.id} is ${messages[oversized]?.bytes} bytes, over SQS's ${SQS_MAX_MESSAGE_BYTES}`,
      );
    }
    const batches = consecutiveBatches(messages, {
      maxItems: MAX_BATCH_ENTRIES,
      maxBytes: SQS_MAX_MESSAGE_BYTES,
      sizeOf: (message) => message.bytes,
    });
    for (const batch of batches) await this.#send(batch);
  }

  async #send(batch: Message[]): Promise<void> {
    const { sqs, queueUrl } = this.#options;
    const maxAttempts = Math.max(1, this.#options.maxAttempts ?? 3);
    const backoffMs = this.#options.backoffMs ?? ((attempt: number) => 100 * 4 ** (attempt - 2));
    const sleep = this.#options.sleep ?? sleepFor;
    // Batch entry ids: the position in the batch.
    let pending = batch.map((message, index) => ({ ...message.entry, Id: String(index) }));
    let lastError = "";
    for (let attempt = 1; attempt <= maxAttempts && pending.length > 0; attempt++) {
      if (attempt > 1) await sleep(backoffMs(attempt));
      const output = await sqs.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: pending }));
      const failed = output.Failed ?? [];
      if (failed.length === 0) return;
      const senderFault = failed.find((failure) => failure.SenderFault);
      lastError = failed.map((failure) => `${failure.Code}: ${failure.Message ?? ""}`).join("; ");
      // The request itself is wrong: sending it again cannot help.
      if (senderFault) break;
      const again = new Set(failed.map((failure) => failure.Id));
      pending = pending.filter((entry) => again.has(entry.Id));
    }
    throw new Error(`${pending.length} of ${batch.length} webhook deliveries could not be queued: ${lastError}`);
  }
}

export interface SqsDeliveryRetryQueueOptions {
  readonly sqs: SQSClient;
  /** URL of the standard retry queue (`SLUICE_DELIVERY_RETRY_QUEUE_URL`). */
  readonly queueUrl: string;
}

/** The retry queue: a delivery waits there, delayed, until its next attempt is due. */
export class SqsDeliveryRetryQueue {
  readonly #options: SqsDeliveryRetryQueueOptions;

  constructor(options: SqsDeliveryRetryQueueOptions) {
    this.#options = options;
  }

  /**
   * Sends `delivery` (with its `attempts` and `nextAttemptAt` as they are to be kept) so that it
   * comes back at `nextAttemptAt`, or after 15 minutes when that is later (it is then sent again).
   */
  async schedule(delivery: DeliveryRecord, now: number): Promise<void> {
    const body = JSON.stringify(delivery);
    const bytes = Buffer.byteLength(body, "utf8");
    if (bytes > SQS_MAX_MESSAGE_BYTES) {
      throw new Error(`delivery ${delivery.id} is ${bytes} bytes, over SQS's ${SQS_MAX_MESSAGE_BYTES}`);
    }
    await this.#options.sqs.send(
      new SendMessageCommand({
        QueueUrl: this.#options.queueUrl,
        MessageBody: body,
        DelaySeconds: delaySecondsUntil(delivery.nextAttemptAt, now),
      }),
    );
  }
}
