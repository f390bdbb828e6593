/**
 * Shared pieces of the tests of deploys, updates and deletions within a request's time
 * (test/unit/core/{update,workflow-trigger,delete}-deploys.test.ts): where the process is "killed"
 * (a step that never ends), a hook that fails, and the deploy finisher run as Lambda would.
 */
import type { Deps } from "#core/ports/deps";
import { createDeployFinisherHandler } from "#internal/deploy-finisher";
import type { InvocationResult } from "#runtime/protocol";

/** A step that never ends: the process was killed there. */
export const never = () => new Promise<never>(() => {});

/**
 * A kill point: `hangs(point)` is true (once) the first time the code reaches `point` while armed,
 * and `reached` resolves then. Armed from the start unless `armedLater` (then `arm()` arms it).
 */
export function killPoint<P extends string>(at: P | undefined, armedLater = false) {
  let armed = !armedLater;
  let reach: () => void = () => {};
  const reached = new Promise<void>((resolve) => (reach = resolve));
  return {
    reached,
    arm: () => {
      armed = true;
    },
    hangs: (point: P) => {
      if (!armed || at !== point) return false;
      armed = false;
      reach();
      return true;
    },
  };
}

/** A hook's result when the third party refused it. */
export function failedHook(invocationId: string, nowMs: number): InvocationResult {
  return {
    invocationId,
    emits: [],
    dbWrites: {},
    logs: [],
    durationMs: 1,
    error: { name: "Error", message: "the third party said no", ts: nowMs },
  };
}

/** Runs the finisher's jobs handed over so far (emptying `handedOver`), as Lambda would. */
export async function runHandedOver(deps: Deps, handedOver: string[]): Promise<void> {
  const handler = createDeployFinisherHandler(async () => deps);
  for (const id of handedOver.splice(0)) await handler({ sourceId: id }, { getRemainingTimeInMillis: () => 120_000 });
}
