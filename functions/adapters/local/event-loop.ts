/**
 * Sharing local mode's one event loop. better-sqlite3 is synchronous, so work whose size grows with
 * what a tenant stored (its history, its channels, its sources) is done in pieces, with a turn of the
 * event loop between them, so every other request is served in between (docs/events.md "Many
 * tenants, one process").
 */
import { performance } from "node:perf_hooks";
import { setImmediate } from "node:timers/promises";

/** Resolves in the next turn of the event loop, after the I/O that is ready now has been handled. */
export const nextTurn = (): Promise<void> => setImmediate();

/**
 * For loops of many small steps (one index lookup per source or channel): {@link spend} yields to the
 * event loop once `budgetMs` have passed since the last yield, so a loop of any length holds the
 * loop for about `budgetMs` at a time, while a short one costs no turn at all.
 */
export class TurnBudget {
  private since = performance.now();

  constructor(private readonly budgetMs = 5) {}

  async spend(): Promise<void> {
    if (performance.now() - this.since < this.budgetMs) return;
    await nextTurn();
    this.since = performance.now();
  }
}
