/**
 * Sharing local mode's one event loop. better-sqlite3 is synchronous, so work whose size grows with
 * what a tenant stored (its history, its channels, its sources) is done in pieces, with a turn of the
 * event loop between them, so every other request is served in between (docs/events.md "Many
 * tenants, one process").
 */
import { performance } from "node:perf_hooks";

/**
 * Hands out turns of the event loop to long work, one piece per loop iteration in all. With plain
 * `setImmediate`, every piece waiting would run in the same iteration (Node runs all the immediates
 * queued before it starts), so ten deletions at once would hold the loop ten pieces long between
 * two reads of the sockets; here they take turns, first come first served, and the I/O of every
 * other request is handled between any two pieces.
 */
class TurnQueue {
  private readonly waiting: (() => void)[] = [];
  private head = 0;
  private scheduled = false;

  next(): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.head >= this.waiting.length) return;
    this.scheduled = true;
    // An immediate queued while immediates run waits for the next iteration: one piece per iteration.
    setImmediate(this.release);
  }

  private readonly release = (): void => {
    this.scheduled = false;
    const resolve = this.waiting[this.head++];
    if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
    resolve?.();
    this.schedule();
  };
}

const turns = new TurnQueue();

/**
 * Resolves in a later turn of the event loop, after the I/O that is ready has been handled and
 * after the pieces of long work that asked before (one per loop iteration).
 */
export const nextTurn = (): Promise<void> => turns.next();

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
