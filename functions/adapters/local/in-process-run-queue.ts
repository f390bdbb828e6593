import type { Logger } from "#ports/logger";
import type { RunJob, RunQueue } from "#ports/run-queue";

export interface InProcessRunQueueOptions {
  /** Runs the job; in local mode `runSource` of `#core/source-runs` with the local deps. */
  run(job: RunJob): Promise<unknown>;
  log: Logger;
  /**
   * Jobs running at once; the rest wait in arrival order.
   * @default 64
   */
  concurrency?: number;
}

/**
 * Local mode's run queue: jobs run in this process, in the background, a bounded number at a
 * time. Jobs live in memory only (unlike webhook deliveries, which are rows in SQLite): a hard kill
 * loses the ones not yet run; `drain` lets a clean stop finish them.
 */
export class InProcessRunQueue implements RunQueue {
  private readonly waiting: RunJob[] = [];
  private running = 0;
  private readonly idle = new Set<() => void>();
  private readonly concurrency: number;

  constructor(private readonly options: InProcessRunQueueOptions) {
    this.concurrency = options.concurrency ?? 64;
  }

  async enqueue(job: RunJob): Promise<void> {
    this.waiting.push(job);
    this.pump();
  }

  /** Jobs queued or running. */
  get pending(): number {
    return this.waiting.length + this.running;
  }

  /** Resolves when no job is queued or running, or after `timeoutMs`. */
  drain(timeoutMs: number): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.idle.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.idle.add(done);
    });
  }

  private pump(): void {
    while (this.running < this.concurrency) {
      const job = this.waiting.shift();
      if (!job) break;
      this.running++;
      this.options
        .run(job)
        .catch((error: unknown) =>
          this.options.log.error("a queued source run failed", { source_id: job.sourceId, error: String(error) }),
        )
        .finally(() => {
          this.running--;
          this.pump();
          if (this.pending === 0) for (const done of [...this.idle]) done();
        });
    }
  }
}
