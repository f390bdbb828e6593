/** Daily usage counters of a user or workspace, reported with their quotas. */
export interface DailyUsage {
  invocations: number;
  computeTimeMs: number;
  credits: number;
}

/**
 * Counts invocations, compute time and credits per owner and UTC day.
 * Adapters: `SqliteUsageStore`, `DynamoDbUsageStore`.
 */
export interface UsageStore {
  /** Adds to the counters of `ownerId` for `day` (`YYYY-MM-DD`, UTC). */
  addUsage(ownerId: string, day: string, delta: Partial<DailyUsage>): Promise<void>;
  /** The counters of `ownerId` for `day`; zeros when nothing was counted. */
  getUsage(ownerId: string, day: string): Promise<DailyUsage>;
}
