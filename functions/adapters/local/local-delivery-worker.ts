import type { DeliveryRecord } from "#core/subscription-model";
import {
  attemptDelivery,
  type DeliveryDeps,
  type DeliverySettings,
  deliveryLogFields,
  deliverySettings,
  logDeliveryOutcome,
} from "#core/webhook-delivery";
import type { Deps } from "#ports/deps";
import type { WebhookSender } from "#ports/webhook-sender";
import type { SqliteDeliveryQueue } from "./sqlite-delivery-queue.ts";

export interface LocalDeliveryWorkerOptions {
  queue: SqliteDeliveryQueue;
  deps: DeliveryDeps & Pick<Deps, "log">;
  sender: WebhookSender;
  /** Retry policy and attempt time limit; DEFAULT_DELIVERY_SETTINGS for what is not given. */
  settings?: Partial<DeliverySettings>;
  /** Attempts in flight at once, each to a different webhook. @default 8 */
  concurrency?: number;
  /** When Sluice itself failed an attempt (a store, a secret), the delivery is tried again this much later. @default 5000 */
  internalRetryMs?: number;
}

/** The longest the worker sleeps without looking at the queue (a clock jump heals within it). */
const MAX_SLEEP_MS = 60_000;
/** The shortest timer between two looks at the queue. */
const MIN_SLEEP_MS = 5;
/** The sleep while a due delivery waits behind another process's claim (not a supported setup). */
const BLOCKED_SLEEP_MS = 1_000;

/**
 * Local mode's delivery worker: claims due deliveries from the SQLite queue and attempts them,
 * several webhooks at once (one delivery per webhook at a time, see SqliteDeliveryQueue). It wakes
 * at once when deliveries are queued or an attempt ends, and otherwise sleeps until the next retry
 * is due: no polling on the hot path. Assumes it is the only worker on its database file.
 */
export class LocalDeliveryWorker {
  private readonly settings: DeliverySettings;
  private readonly concurrency: number;
  private readonly internalRetryMs: number;
  private readonly inFlight = new Set<Promise<void>>();
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly options: LocalDeliveryWorkerOptions) {
    this.settings = deliverySettings(options.settings);
    this.concurrency = Math.max(1, options.concurrency ?? 8);
    this.internalRetryMs = options.internalRetryMs ?? 5_000;
  }

  /** Starts delivering; claims left by a stopped process are released first. */
  start(): void {
    if (this.running) return;
    this.running = true;
    const released = this.options.queue.releaseAllClaims();
    if (released > 0) this.options.deps.log.info("webhook deliveries resumed after a stop", { deliveries: released });
    this.unsubscribe = this.options.queue.onEnqueue(() => this.pump());
    this.pump();
  }

  /**
   * Stops claiming, then waits up to `graceMs` for attempts in flight. Resolves true when they all
   * ended; an attempt still running is abandoned and, its claim never completed, retried after a
   * restart under the same delivery id.
   */
  async stop(graceMs = 5_000): Promise<boolean> {
    this.running = false;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.inFlight.size === 0) return true;
    let timeout: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<false>((resolve) => {
      timeout = setTimeout(() => resolve(false), graceMs);
    });
    const done = Promise.allSettled([...this.inFlight]).then(() => true as const);
    const ended = await Promise.race([done, gaveUp]);
    clearTimeout(timeout);
    return ended;
  }

  /** Claims what is due into the free slots, then sleeps until the next thing can be due. */
  private pump(): void {
    if (!this.running) return;
    const { queue, deps } = this.options;
    try {
      const free = this.concurrency - this.inFlight.size;
      if (free > 0) {
        for (const delivery of queue.claimDue(deps.clock.nowMs(), free)) this.track(delivery);
      }
      this.sleep();
    } catch (error) {
      deps.log.error("the webhook delivery queue could not be read", { error: String(error) });
      this.setTimer(this.internalRetryMs);
    }
  }

  private sleep(): void {
    this.setTimer(this.sleepMs());
  }

  /** How long to sleep before looking at the queue again; undefined: until woken. */
  private sleepMs(): number | undefined {
    // With every slot taken, the end of an attempt wakes the worker.
    if (this.inFlight.size >= this.concurrency) return undefined;
    const now = this.options.deps.clock.nowMs();
    const next = this.options.queue.nextWakeAt(now);
    if (next === undefined) return undefined;
    if (next <= now) {
      // Due but not claimable: it waits behind a delivery of its webhook in flight here (whose end
      // wakes the worker) or behind a lease of another process.
      return this.inFlight.size > 0 ? undefined : BLOCKED_SLEEP_MS;
    }
    return Math.min(MAX_SLEEP_MS, Math.max(MIN_SLEEP_MS, next - now));
  }

  private setTimer(delayMs: number | undefined): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (delayMs === undefined || !this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.pump();
    }, delayMs);
  }

  private track(delivery: DeliveryRecord): void {
    const attempt = this.attempt(delivery).finally(() => {
      this.inFlight.delete(attempt);
      this.pump();
    });
    this.inFlight.add(attempt);
  }

  private async attempt(delivery: DeliveryRecord): Promise<void> {
    const { queue, deps, sender } = this.options;
    try {
      const outcome = await attemptDelivery(deps, sender, delivery, deps.clock.nowMs(), this.settings);
      if (outcome.kind === "retry") queue.reschedule(delivery.id, outcome.at, outcome.attempts, outcome.error);
      else queue.complete(delivery.id);
      logDeliveryOutcome(deps.log, delivery, outcome);
    } catch (error) {
      deps.log.error("webhook delivery could not be attempted", {
        ...deliveryLogFields(delivery),
        error: String(error),
      });
      try {
        queue.release(delivery.id, deps.clock.nowMs() + this.internalRetryMs);
      } catch {
        // The database is gone (shutting down): the claim's lease brings the delivery back.
      }
    }
  }
}
