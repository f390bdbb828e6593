/**
 * Background work on a timer in local mode: `pass` every `everyMs`, never two at once (a pass
 * that outlasts the interval makes the next tick skip), its failure logged as `failure`. The timer
 * does not keep the process alive; `stop` clears it and waits for a pass in progress.
 */
import type { Logger } from "#core/ports/logger";

export interface PeriodicPass {
  stop(): Promise<void>;
}

export function startPeriodicPass(
  everyMs: number,
  pass: () => Promise<unknown>,
  log: Logger,
  failure: string,
): PeriodicPass {
  let running: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    running ??= pass()
      .catch((error: unknown) => log.error(failure, { error: String(error) }))
      .finally(() => {
        running = undefined;
      });
  }, everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

/**
 * A periodic pass that handles what is due in batches: `batch` is called until it handles fewer
 * than `batchSize` (a full batch means more may be due: go on at once rather than a tick later)
 * or `stop` is called.
 */
export function startBatchedPass(
  everyMs: number,
  batchSize: number,
  batch: () => Promise<number>,
  log: Logger,
  failure: string,
): PeriodicPass {
  let stopped = false;
  const pass = startPeriodicPass(
    everyMs,
    async () => {
      while (!stopped && (await batch()) >= batchSize) {}
    },
    log,
    failure,
  );
  return {
    async stop() {
      stopped = true;
      await pass.stop();
    },
  };
}
