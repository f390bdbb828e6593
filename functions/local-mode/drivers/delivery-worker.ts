import type { SqliteDeliveryQueue } from "#adapters/local/sqlite-delivery-queue";
import type { Deps } from "#core/ports/deps";
import type { Secrets } from "#core/ports/secrets";
import type { WebhookSender } from "#core/ports/webhook-sender";
import type { DeliveryRecord } from "#core/subscription-model";
import {
  attemptDelivery,
  type DeliveryDeps,
  type DeliverySettings,
  deliveryLogFields,
  deliverySettings,
  logDeliveryOutcome,
} from "#core/webhook-delivery";

export interface LocalDeliveryWorkerOptions {
  queue: SqliteDeliveryQueue;
  deps: DeliveryDeps & Pick<Deps, "log">;
  sender: WebhookSender;
  /** Retry policy and attempt time limit; DEFAULT_DELIVERY_SETTINGS for what is not given. */
  settings?: Partial<DeliverySettings>;
  /** Webhooks delivered to at once. @default 8 */
  concurrency?: number;
  /**
   * Deliveries of one webhook in flight at once: a batch's deliveries are started in queue order,
   * each when one of this many before it was answered. 1: one at a time, strictly in order.
   * @default 1
   */
  inFlightPerWebhook?: number;
  /**
   * Due deliveries of one webhook claimed together and then sent in order on its kept-alive
   * connections: one claim per batch instead of per delivery. @default 128
   */
  batchSize?: number;
  /** When Sluice itself failed an attempt (a store, a secret), the delivery is tried again this much later. @default 5000 */
  internalRetryMs?: number;
}

/** The longest the worker sleeps without looking at the queue (a clock jump heals within it). */
const MAX_SLEEP_MS = 60_000;
/** The shortest timer between two looks at the queue. */
const MIN_SLEEP_MS = 5;
/** The sleep while a due delivery waits behind another process's claim (not a supported setup). */
const BLOCKED_SLEEP_MS = 1_000;
/** A batch stops before a delivery whose attempt could outlast the batch's lease by then (less this margin). */
const LEASE_MARGIN_MS = 1_000;

/** Signing secrets kept opened, at most (the cache starts over past it). */
const OPENED_SECRETS_MAX = 1_024;

/**
 * The deps of the worker's attempts: a sealed signing secret is opened (decrypted) once, not per
 * delivery. Keyed by the sealed value, so a rotated secret is a new key and the deliveries
 * attempted after a rotation are signed with the new one.
 */
function withSecretsOpenedOnce<D extends DeliveryDeps>(deps: D): D {
  const opened = new Map<string, Promise<string>>();
  const secrets: Secrets = {
    seal: (plaintext) => deps.secrets.seal(plaintext),
    open: (sealed) => {
      let secret = opened.get(sealed);
      if (!secret) {
        if (opened.size >= OPENED_SECRETS_MAX) opened.clear();
        secret = deps.secrets.open(sealed);
        opened.set(sealed, secret);
        secret.catch(() => opened.delete(sealed));
      }
      return secret;
    },
  };
  return { ...deps, secrets };
}

/**
 * Local mode's delivery worker: claims due deliveries from the SQLite queue and attempts them,
 * several webhooks at once, one delivery in flight per webhook: it claims a webhook's next due
 * deliveries as a batch (see SqliteDeliveryQueue) and sends them one after the other, in order. It
 * looks at the queue once per event-loop turn when deliveries were queued or a batch ended (however
 * many did), and otherwise sleeps until the next retry is due: no polling on the hot path. Assumes
 * it is the only worker on its database file.
 */
export class LocalDeliveryWorker {
  private readonly settings: DeliverySettings;
  private readonly concurrency: number;
  private readonly inFlightPerWebhook: number;
  private readonly batchSize: number;
  private readonly internalRetryMs: number;
  private readonly inFlight = new Set<Promise<void>>();
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private pumpScheduled = false;
  private readonly deps: LocalDeliveryWorkerOptions["deps"];
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly options: LocalDeliveryWorkerOptions) {
    this.settings = deliverySettings(options.settings);
    this.concurrency = Math.max(1, options.concurrency ?? 8);
    this.inFlightPerWebhook = Math.max(1, Math.floor(options.inFlightPerWebhook ?? 1));
    this.batchSize = Math.max(1, Math.floor(options.batchSize ?? 128));
    this.internalRetryMs = options.internalRetryMs ?? 5_000;
    this.deps = withSecretsOpenedOnce(options.deps);
  }

  /** Starts delivering; claims left by a stopped process are released first. */
  start(): void {
    if (this.running) return;
    this.running = true;
    const released = this.options.queue.releaseAllClaims();
    if (released > 0) this.options.deps.log.info("webhook deliveries resumed after a stop", { deliveries: released });
    this.unsubscribe = this.options.queue.onEnqueue(() => this.schedulePump());
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
    if (this.inFlight.size > 0) {
      let timeout: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<false>((resolve) => {
        timeout = setTimeout(() => resolve(false), graceMs);
      });
      const done = Promise.allSettled([...this.inFlight]).then(() => true as const);
      const ended = await Promise.race([done, gaveUp]);
      clearTimeout(timeout);
      if (!ended) {
        this.flushQuietly();
        return false;
      }
    }
    this.flushQuietly();
    return true;
  }

  /** Writes the completions the queue groups (see `SqliteDeliveryQueue.complete`) before the database closes. */
  private flushQuietly(): void {
    try {
      this.options.queue.flush();
    } catch (error) {
      // Those deliveries are made again after a restart, under the same ids.
      this.options.deps.log.error("completed webhook deliveries could not be removed from the queue", {
        error: String(error),
      });
    }
  }

  /** Pumps once in the next turn of the event loop, however many enqueues and batch ends asked for it. */
  private schedulePump(): void {
    if (this.pumpScheduled || !this.running) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Claims what is due into the free slots, then sleeps until the next thing can be due. */
  private pump(): void {
    if (!this.running) return;
    const { queue, deps } = this.options;
    try {
      const free = this.concurrency - this.inFlight.size;
      if (free > 0) {
        const now = deps.clock.nowMs();
        for (const batch of queue.claimBatches(now, free, this.batchSize)) this.track(batch, now);
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

  private track(batch: readonly DeliveryRecord[], claimedAt: number): void {
    const run = this.deliver(batch, claimedAt).finally(() => {
      this.inFlight.delete(run);
      this.schedulePump();
    });
    this.inFlight.add(run);
  }

  /**
   * Attempts one webhook's batch in queue order, up to `inFlightPerWebhook` at once: each lane takes
   * the next delivery not yet started when its previous one ended. What is left when the worker
   * stops, or when the next attempt could outlast the batch's lease, is released unattempted.
   */
  private async deliver(batch: readonly DeliveryRecord[], claimedAt: number): Promise<void> {
    const { queue, deps } = this.options;
    const leaseEnd = claimedAt + queue.leaseMs - this.settings.timeoutMs - LEASE_MARGIN_MS;
    let next = 0;
    const lane = async () => {
      while (next < batch.length) {
        const index = next++;
        const now = deps.clock.nowMs();
        if (index > 0 && (!this.running || now > leaseEnd)) {
          // The other lanes stop too: every delivery from here on is released.
          next = batch.length;
          for (const rest of batch.slice(index)) this.releaseQuietly(rest.id, now);
          return;
        }
        await this.attempt(batch[index] as DeliveryRecord);
      }
    };
    const lanes = Math.min(this.inFlightPerWebhook, batch.length);
    await Promise.all(Array.from({ length: lanes }, lane));
  }

  private releaseQuietly(id: string, at: number): void {
    try {
      this.options.queue.release(id, at);
    } catch {
      // The database is gone (shutting down): the claim's lease brings the delivery back.
    }
  }

  private async attempt(delivery: DeliveryRecord): Promise<void> {
    const { queue, sender } = this.options;
    const deps = this.deps;
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
      this.releaseQuietly(delivery.id, deps.clock.nowMs() + this.internalRetryMs);
    }
  }
}
