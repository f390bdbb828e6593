/** A hold on one source's runs, taken by {@link SourceRunLock.acquire}. */
export interface SourceRunLease {
  /**
   * True while the hold is still this lease's: false once it was released or it expired (the lease
   * time passed), after which another run may hold the source.
   */
  held(): boolean;
  /** Lets the next run in. Releasing twice, or after the lease expired, changes nothing. */
  release(): Promise<void>;
}

export interface AcquireOptions {
  /** How long the hold lasts unless released first: a run that never ends frees its source then. */
  leaseMs: number;
  /**
   * Epoch ms after which the caller stops waiting (the lock is not taken). Undefined: as long as
   * the adapter waits at most (locally without end; on AWS a bounded time, see the adapter).
   */
  waitUntilMs?: number;
}

/**
 * One run at a time per source, for sources whose component declares a `$.service.db` prop: a run
 * reads the db after taking the lock and writes it before letting go, so N concurrent runs of a
 * counter give N distinct counts (docs/components.md, "One run at a time"). Hooks count as runs.
 * Adapters: `LocalSourceRunLock` (in process, waiters served in arrival order) and
 * `DynamoDbSourceRunLock` (a lease item with conditional writes, waiters poll); both pass
 * `test/contract/source-run-lock.contract.ts`.
 */
export interface SourceRunLock {
  /** Resolves with the hold, or with undefined when it could not be taken before `waitUntilMs`. */
  acquire(sourceId: string, options: AcquireOptions): Promise<SourceRunLease | undefined>;
}
