/**
 * The deploy sweeper (docs/aws.md "Interrupted deploys"): run by an EventBridge schedule every few
 * minutes, it removes the sources whose deploy began more than `DEPLOY_ABANDONED_AFTER_MS` ago and
 * never finished: the route function deploying them was killed (its timeout, an out-of-memory
 * end) between saving the source and its last step. Idempotent: a run that is cut short, or two
 * runs at once, leave what the next run finishes.
 */
import type { Deps } from "#core/ports/deps";
import { DEPLOY_ABANDONED_AFTER_MS, recoverInterruptedDeploys } from "#core/sources";
import { awsDepsLoader } from "./internal-handler.ts";

/** The sweeper's entry with its dependencies given (tests); {@link handler} builds the AWS ones. */
export const createDeploySweeperHandler =
  (
    loadDeps: () => Promise<Deps> = awsDepsLoader({
      // Removing a source: its records and events, its function, its timer, its delayed emits.
      delays: () => import("#adapters/aws/parts/delays"),
      host: () => import("#adapters/aws/parts/host"),
      tables: () => import("#adapters/aws/parts/tables"),
      timers: () => import("#adapters/aws/parts/timers"),
    }),
  ) =>
  async (): Promise<void> => {
    const deps = await loadDeps();
    await recoverInterruptedDeploys(deps, deps.clock.nowMs() - DEPLOY_ABANDONED_AFTER_MS);
  };

export const handler = createDeploySweeperHandler();
