import type { TimerSpec } from "#core/component-model";
import type { Clock } from "#core/ports/clock";
import type { Logger } from "#core/ports/logger";
import type { Timers } from "#core/ports/timers";
import { nextFireAt, validateTimerSpec } from "#core/timer-schedule";

export interface LocalTimersOptions {
  /** The time the schedule is computed from. */
  clock: Clock;
  /** Runs the source; called with the slot's time, not the (slightly later) wake-up time. */
  onFire(sourceId: string, scheduledAtMs: number): Promise<void> | void;
  log: Logger;
}

/** Node's setTimeout fires at once for delays above 2^31-1 ms (about 24.8 days); longer waits are chunked. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

interface Entry {
  spec: TimerSpec;
  /** Interval timers fire at `anchorMs + k * interval`. */
  anchorMs: number;
  nextAtMs: number;
  handle?: NodeJS.Timeout;
}

/**
 * In-process timers for local mode: one `setTimeout` per source, unref'd so that timers never
 * keep the process alive.
 *
 * - The anchor of an interval timer is the time of `schedule`, so a restart (a new instance
 *   scheduling again) fires at the next interval after start: no burst of missed runs.
 * - A slot that comes while the source's previous run is still going is skipped and logged,
 *   so runs of one source never overlap or pile up.
 * - Errors of `onFire` are logged and never stop the timer.
 */
export class LocalTimers implements Timers {
  private readonly entries = new Map<string, Entry>();
  private readonly running = new Map<string, Promise<void>>();
  private stopped = false;

  constructor(private readonly options: LocalTimersOptions) {}

  /** Creates or replaces the timer of a source; the first run is one interval (or cron slot) away. */
  async schedule(sourceId: string, spec: TimerSpec): Promise<void> {
    const checked = validateTimerSpec(spec, "timer");
    if (this.stopped) {
      this.options.log.warn("timer not scheduled: the timers are stopped", { sourceId });
      return;
    }
    this.clear(sourceId);
    const now = this.options.clock.nowMs();
    const entry: Entry = { spec: checked, anchorMs: now, nextAtMs: nextFireAt(checked, now, now) };
    this.entries.set(sourceId, entry);
    this.arm(sourceId, entry);
  }

  /** Removes the timer of a source (a run in progress finishes). Succeeds when there is none. */
  async cancel(sourceId: string): Promise<void> {
    this.clear(sourceId);
  }

  /** Cancels every timer and resolves once the runs in progress have settled. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const sourceId of [...this.entries.keys()]) this.clear(sourceId);
    await Promise.allSettled([...this.running.values()]);
  }

  /** Sources with a timer, and when each fires next (epoch ms); for status output and tests. */
  scheduled(): Map<string, number> {
    return new Map([...this.entries].map(([sourceId, entry]) => [sourceId, entry.nextAtMs]));
  }

  private clear(sourceId: string): void {
    const entry = this.entries.get(sourceId);
    if (entry?.handle) clearTimeout(entry.handle);
    this.entries.delete(sourceId);
  }

  private arm(sourceId: string, entry: Entry): void {
    if (!Number.isFinite(entry.nextAtMs)) {
      this.options.log.warn("timer never fires again", { sourceId, cron: entry.spec.cron });
      return;
    }
    const delay = Math.min(Math.max(0, entry.nextAtMs - this.options.clock.nowMs()), MAX_TIMEOUT_MS);
    entry.handle = setTimeout(() => this.wake(sourceId, entry), delay);
    entry.handle.unref();
  }

  private wake(sourceId: string, entry: Entry): void {
    if (this.entries.get(sourceId) !== entry) return; // replaced or cancelled meanwhile
    const now = this.options.clock.nowMs();
    if (now < entry.nextAtMs) {
      this.arm(sourceId, entry); // a chunk of a long wait, or a clock behind the timer's
      return;
    }
    const scheduledAtMs = entry.nextAtMs;
    try {
      entry.nextAtMs = nextFireAt(entry.spec, Math.max(now, scheduledAtMs), entry.anchorMs);
    } catch (error) {
      this.options.log.error("timer stopped: its next time cannot be computed", { sourceId, error: describe(error) });
      this.entries.delete(sourceId);
      return;
    }
    this.arm(sourceId, entry);
    this.fire(sourceId, scheduledAtMs);
  }

  private fire(sourceId: string, scheduledAtMs: number): void {
    if (this.running.has(sourceId)) {
      this.options.log.warn("timer run skipped: the previous run of this source is still in progress", {
        sourceId,
        scheduledAt: new Date(scheduledAtMs).toISOString(),
      });
      return;
    }
    // onFire starts on a microtask, so `running` holds the run before anything of it executes.
    const run: Promise<void> = Promise.resolve()
      .then(() => this.options.onFire(sourceId, scheduledAtMs))
      .catch((error: unknown) => {
        this.options.log.error("timer run failed", {
          sourceId,
          scheduledAt: new Date(scheduledAtMs).toISOString(),
          error: describe(error),
        });
      })
      .finally(() => {
        if (this.running.get(sourceId) === run) this.running.delete(sourceId);
      });
    this.running.set(sourceId, run);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error);
}
