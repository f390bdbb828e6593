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
