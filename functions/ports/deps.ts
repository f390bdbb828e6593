import type { Clock } from "./clock.ts";
import type { IdGenerator } from "./id-generator.ts";
import type { IdentityStore } from "./identity-store.ts";
import type { Logger } from "./logger.ts";
import type { UsageStore } from "./usage-store.ts";

/** Daily quotas reported on users and workspaces. Zero means unlimited. */
export interface Quotas {
  dailyInvocations: number;
  dailyComputeTimeMs: number;
  dailyCredits: number;
}

/**
 * What use cases and handlers receive. Each platform has one composition root that builds it:
 * `functions/adapters/local/composition.ts` and `functions/adapters/aws/composition.ts`.
 */
export interface Deps {
  identity: IdentityStore;
  usage: UsageStore;
  clock: Clock;
  ids: IdGenerator;
  log: Logger;
  quotas: Quotas;
}
