/**
 * A fixed-rate schedule: slot `i` (from 0) is due `i * 1000 / ratePerSec` ms after `startMs`.
 * Pure: the load generator asks it how many slots are due by now and when the next one is.
 */
export class RateSchedule {
  private readonly intervalMs: number;

  constructor(
    readonly ratePerSec: number,
    readonly startMs: number,
    /** Slots in all (e.g. rate × duration); no limit when omitted. */
    readonly total = Number.POSITIVE_INFINITY,
  ) {
    if (!(ratePerSec > 0 && Number.isFinite(ratePerSec)))
      throw new RangeError(`rate must be positive, got ${ratePerSec}`);
    this.intervalMs = 1000 / ratePerSec;
  }

  /** When slot `index` is due. */
  dueAt(index: number): number {
    return this.startMs + index * this.intervalMs;
  }

  /** How many slots are due at `nowMs` (slot 0 is due at the start), at most `total`. */
  dueBy(nowMs: number): number {
    if (nowMs < this.startMs) return 0;
    // The epsilon keeps a slot due exactly at `nowMs` from being lost to floating-point error.
    return Math.min(this.total, Math.floor((nowMs - this.startMs) / this.intervalMs + 1e-9) + 1);
  }

  /** Slots due within `durationMs` from the start (the run's planned total). */
  static slotsIn(ratePerSec: number, durationMs: number): number {
    return Math.max(0, Math.ceil((durationMs * ratePerSec) / 1000 - 1e-9));
  }
}
