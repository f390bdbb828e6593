import type { Clock } from "#core/ports/clock";
import type { AcquireOptions, SourceRunLease, SourceRunLock } from "#core/ports/source-run-lock";

interface Waiter {
  leaseMs: number;
  resolve(lease: SourceRunLease | undefined): void;
  timer: NodeJS.Timeout | undefined;
}

/** One source's lock: who holds it (a token per lease) and who waits, in arrival order. */
interface Slot {
  holder: object | undefined;
  expiry: NodeJS.Timeout | undefined;
  waiters: Waiter[];
}

/**
 * `SourceRunLock` in this process (local mode: one server per data dir, so one process runs a
 * source). Waiters are served in arrival order, so a run or hook waiting behind a busy source is
 * never overtaken; a waiter with a deadline leaves the line when it passes. A lease that is not
 * released in `leaseMs` passes the source on to the next waiter (its late release does nothing).
 */
export class LocalSourceRunLock implements SourceRunLock {
  private readonly slots = new Map<string, Slot>();

  constructor(private readonly clock: Clock) {}

  acquire(sourceId: string, options: AcquireOptions): Promise<SourceRunLease | undefined> {
    let slot = this.slots.get(sourceId);
    if (!slot) {
      slot = { holder: undefined, expiry: undefined, waiters: [] };
      this.slots.set(sourceId, slot);
    }
    if (slot.holder === undefined && slot.waiters.length === 0) {
      return Promise.resolve(this.grant(sourceId, slot, options.leaseMs));
    }
    const waitMs = options.waitUntilMs === undefined ? undefined : options.waitUntilMs - this.clock.nowMs();
    if (waitMs !== undefined && waitMs <= 0) return Promise.resolve(undefined);
    const line = slot;
    return new Promise((resolve) => {
      const waiter: Waiter = { leaseMs: options.leaseMs, resolve, timer: undefined };
      if (waitMs !== undefined) {
        waiter.timer = setTimeout(() => {
          line.waiters.splice(line.waiters.indexOf(waiter), 1);
          resolve(undefined);
        }, waitMs);
      }
      line.waiters.push(waiter);
    });
  }

  /** Sources held or waited for (tests, diagnostics). */
  get busySources(): number {
    return this.slots.size;
  }

  private grant(sourceId: string, slot: Slot, leaseMs: number): SourceRunLease {
    const token = {};
    slot.holder = token;
    slot.expiry = setTimeout(() => this.pass(sourceId, slot, token), leaseMs);
    // A lease never keeps the process alive on its own.
    slot.expiry.unref();
    return {
      held: () => slot.holder === token,
      release: async () => this.pass(sourceId, slot, token),
    };
  }

  /** Ends the lease `token` (if it still holds) and hands the source to the first waiter. */
  private pass(sourceId: string, slot: Slot, token: object): void {
    if (slot.holder !== token) return;
    clearTimeout(slot.expiry);
    slot.holder = undefined;
    slot.expiry = undefined;
    const next = slot.waiters.shift();
    if (next) {
      clearTimeout(next.timer);
      next.resolve(this.grant(sourceId, slot, next.leaseMs));
    } else {
      this.slots.delete(sourceId);
    }
  }
}
