import type { TimerSpec } from "#core/component-model";
import type { Clock } from "#core/ports/clock";
import type { Logger } from "#core/ports/logger";
import { type Timers, type TimerTarget, timerTargetId } from "#core/ports/timers";
import { nextFireAt, validateTimerSpec } from "#core/timer-schedule";

export interface LocalTimersOptions {
  /** The time the schedule is computed from. */
  clock: Clock;
  /** Runs the timer's source or workflow; called with the slot's time, not the (slightly later) wake-up time. */
  onFire(target: TimerTarget, scheduledAtMs: number): Promise<void> | void;
  log: Logger;
}

/** Node's setTimeout fires at once for delays above 2^31-1 ms (about 24.8 days); longer waits are chunked. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

interface Entry {
  target: TimerTarget;
  spec: TimerSpec;
  /** Interval timers fire at `anchorMs + k * interval`. */
  anchorMs: number;
  nextAtMs: number;
  handle?: NodeJS.Timeout;
}

/**
 * In-process timers for local mode: one `setTimeout` per timer (a source's, or a workflow's timer
 * trigger), keyed by `timerTargetId`, unref'd so that timers never keep the process alive.
 *
 * - The anchor of an interval timer is the time of `schedule`, so a restart (a new instance
 *   scheduling again) fires at the next interval after start: no burst of missed runs.
 * - A slot that comes while the timer's previous firing is still going is skipped and logged,
 *   so runs of one source never overlap or pile up. (A workflow's firing only queues its run;
 *   local mode's drivers, `localDrivers`, skip a tick while the previous one is queued or running.)
 * - Errors of `onFire` are logged and never stop the timer.
 */
export class LocalTimers implements Timers {
  private readonly entries = new Map<string, Entry>();
  private readonly running = new Map<string, Promise<void>>();
  private stopped = false;

  constructor(private readonly options: LocalTimersOptions) {}

  /** Creates or replaces a timer; the first run is one interval (or cron slot) away. */
  async schedule(target: TimerTarget, spec: TimerSpec): Promise<void> {
    const checked = validateTimerSpec(spec, "timer");
    if (this.stopped) {
      this.options.log.warn("timer not scheduled: the timers are stopped", { ...target });
      return;
    }
    const id = timerTargetId(target);
    this.clear(id);
    const now = this.options.clock.nowMs();
    const entry: Entry = {
      target: { ...target },
      spec: checked,
      anchorMs: now,
      nextAtMs: nextFireAt(checked, now, now),
    };
    this.entries.set(id, entry);
    this.arm(id, entry);
  }

  /** Removes a timer (a run in progress finishes). Succeeds when there is none. */
  async cancel(target: TimerTarget): Promise<void> {
    this.clear(timerTargetId(target));
  }

  /** Cancels every timer and resolves once the runs in progress have settled. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const id of [...this.entries.keys()]) this.clear(id);
    await Promise.allSettled([...this.running.values()]);
  }

  /** The timers by `timerTargetId` (`dc_` or `ti_`), and when each fires next (epoch ms); for status output and tests. */
  scheduled(): Map<string, number> {
    return new Map([...this.entries].map(([id, entry]) => [id, entry.nextAtMs]));
  }

  private clear(id: string): void {
    const entry = this.entries.get(id);
    if (entry?.handle) clearTimeout(entry.handle);
    this.entries.delete(id);
  }

  private arm(id: string, entry: Entry): void {
    if (!Number.isFinite(entry.nextAtMs)) {
      this.options.log.warn("timer never fires again", { ...entry.target, cron: entry.spec.cron });
      return;
    }
    const delay = Math.min(Math.max(0, entry.nextAtMs - this.options.clock.nowMs()), MAX_TIMEOUT_MS);
    entry.handle = setTimeout(() => this.wake(id, entry), delay);
    entry.handle.unref();
  }

  private wake(id: string, entry: Entry): void {
    if (this.entries.get(id) !== entry) return; // replaced or cancelled meanwhile
    const now = this.options.clock.nowMs();
    if (now < entry.nextAtMs) {
      this.arm(id, entry); // a chunk of a long wait, or a clock behind the timer's
      return;
    }
    const scheduledAtMs = entry.nextAtMs;
    try {
      entry.nextAtMs = nextFireAt(entry.spec, Math.max(now, scheduledAtMs), entry.anchorMs);
    } catch (error) {
      this.options.log.error("timer stopped: its next time cannot be computed", {
        ...entry.target,
        error: describe(error),
      });
      this.entries.delete(id);
      return;
    }
    this.arm(id, entry);
    this.fire(id, entry.target, scheduledAtMs);
  }

  private fire(id: string, target: TimerTarget, scheduledAtMs: number): void {
    if (this.running.has(id)) {
      this.options.log.warn("timer run skipped: the previous run of this timer is still in progress", {
        ...target,
        scheduledAt: new Date(scheduledAtMs).toISOString(),
      });
      return;
    }
    // onFire starts on a microtask, so `running` holds the run before anything of it executes.
    const run: Promise<void> = Promise.resolve()
      .then(() => this.options.onFire(target, scheduledAtMs))
      .catch((error: unknown) => {
        this.options.log.error("timer run failed", {
          ...target,
          scheduledAt: new Date(scheduledAtMs).toISOString(),
          error: describe(error),
        });
      })
      .finally(() => {
        if (this.running.get(id) === run) this.running.delete(id);
      });
    this.running.set(id, run);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error);
}
