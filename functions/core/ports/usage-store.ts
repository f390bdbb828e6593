/** Daily usage counters of a user or workspace, reported with their quotas. */
export interface DailyUsage {
  invocations: number;
  computeTimeMs: number;
  credits: number;
}

/** What a workspace keeps stored: events (with `$logs` and `$errors`) and their JSON bytes. */
export interface StoredUsage {
  events: number;
  /** UTF-8 bytes of each stored event's JSON plus its metadata's JSON. */
  bytes: number;
}

/**
 * Counts invocations, compute time and credits per owner and UTC day; what each workspace keeps
 * stored; and short-lived window counters (runs per minute, rate-limited notices).
 * Adapters: `SqliteUsageStore`, `DynamoDbUsageStore`; both pass `test/contract/usage-store.contract.ts`.
 *
 * Stored totals grow through {@link addStored}, called when events are appended. They shrink where
 * events are physically removed, inside each platform's storage (a trigger on SQLite's events
 * table; the DynamoDB event store's purge and delete-all), and on DynamoDB also by expiry
 * (docs/components.md "Limits").
 */
export interface UsageStore {
  /** Adds to the counters of `ownerId` for `day` (`YYYY-MM-DD`, UTC). */
  addUsage(ownerId: string, day: string, delta: Partial<DailyUsage>): Promise<void>;
  /** The counters of `ownerId` for `day`; zeros when nothing was counted. */
  getUsage(ownerId: string, day: string): Promise<DailyUsage>;
  /**
   * Adds events that `sourceId` of workspace `ownerId` stored at `atMs` (negative amounts take back
   * an addition whose append failed). The first addition of a source records its owner, so that
   * removing its events later subtracts from the right workspace, even after the source is gone.
   */
  addStored(ownerId: string, sourceId: string, atMs: number, delta: StoredUsage): Promise<void>;
  /** What `ownerId` keeps stored; zeros when nothing was added. */
  getStored(ownerId: string): Promise<StoredUsage>;
  /**
   * Adds one to the counter `key` of the window starting at `windowStartMs` and lasting `windowMs`,
   * and returns its value after the addition (1 for the first in the window). Windows are
   * independent: a later window starts again at 1. Atomic: of concurrent calls, exactly one sees 1.
   */
  countInWindow(key: string, windowStartMs: number, windowMs: number): Promise<number>;
}
