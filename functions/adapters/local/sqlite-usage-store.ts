import type { DailyUsage, StoredUsage, UsageStore } from "#core/ports/usage-store";
import type { SqliteDatabase } from "./sqlite-database.ts";

/** Counters added in this turn of the event loop, per owner and day, and who waits for them. */
interface PendingUsage {
  ownerId: string;
  day: string;
  invocations: number;
  computeTimeMs: number;
  credits: number;
}

interface Waiter {
  resolve(): void;
  reject(error: unknown): void;
}

/** Window counters beyond this many are swept of the windows that have ended. */
const WINDOWS_BEFORE_SWEEP = 10_000;

/**
 * `UsageStore` on the local SQLite file: one row per owner and day, added to in place, and one
 * row per workspace of what it keeps stored.
 *
 * Additions are grouped: those of one turn of the event loop are summed per owner (and day) in
 * memory and written in ONE transaction (`setImmediate`), so a busy local mode pays one commit per
 * turn rather than one per run. An addition resolves once it is committed, so a run whose usage was
 * counted has it on disk; reads add what is still pending to what is written.
 *
 * Stored totals shrink through a trigger on the events table (`sqlite-usage-schema.ts`), so every
 * way rows leave it (range deletes, retention, deleting a source) subtracts exactly what it
 * removed, in the same transaction. The trigger finds the workspace through `stored_sources`, which
 * {@link addStored} fills on a source's first addition, before its events can be committed.
 *
 * Window counters (runs per minute, rate-limited notices) live in memory: they last a minute or
 * an hour, one process owns the data dir, and a restart only starts the current windows afresh.
 */
export class SqliteUsageStore implements UsageStore {
  private readonly get;
  private readonly addAll;
  private readonly getStoredRow;
  private readonly recordOwner;
  private pending = new Map<string, PendingUsage>();
  private pendingStored = new Map<string, StoredUsage>();
  private waiters: Waiter[] = [];
  /** Sources whose owner is recorded in `stored_sources` already. */
  private readonly knownSources = new Set<string>();
  private readonly windows = new Map<string, { count: number; endMs: number }>();

  constructor(db: SqliteDatabase) {
    const add = db.prepare<[string, string, number, number, number]>(`
      INSERT INTO usage (owner_id, day, invocations, compute_time_ms, credits) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (owner_id, day) DO UPDATE SET
        invocations = invocations + excluded.invocations,
        compute_time_ms = compute_time_ms + excluded.compute_time_ms,
        credits = credits + excluded.credits`);
    const addStored = db.prepare<[string, number, number]>(`
      INSERT INTO stored_usage (owner_id, events, bytes) VALUES (?, ?, ?)
      ON CONFLICT (owner_id) DO UPDATE SET events = events + excluded.events, bytes = bytes + excluded.bytes`);
    this.addAll = db.transaction((rows: Iterable<PendingUsage>, stored: Map<string, StoredUsage>) => {
      for (const row of rows) add.run(row.ownerId, row.day, row.invocations, row.computeTimeMs, row.credits);
      for (const [ownerId, delta] of stored) addStored.run(ownerId, delta.events, delta.bytes);
    });
    this.get = db.prepare<[string, string], { invocations: number; compute_time_ms: number; credits: number }>(
      "SELECT invocations, compute_time_ms, credits FROM usage WHERE owner_id = ? AND day = ?",
    );
    this.getStoredRow = db.prepare<[string], StoredUsage>("SELECT events, bytes FROM stored_usage WHERE owner_id = ?");
    this.recordOwner = db.prepare<[string, string]>(
      "INSERT OR IGNORE INTO stored_sources (source_id, owner_id) VALUES (?, ?)",
    );
  }

  addUsage(ownerId: string, day: string, delta: Partial<DailyUsage>): Promise<void> {
    const key = `${ownerId}\u0000${day}`;
    let row = this.pending.get(key);
    if (!row) {
      row = { ownerId, day, invocations: 0, computeTimeMs: 0, credits: 0 };
      this.pending.set(key, row);
    }
    row.invocations += delta.invocations ?? 0;
    row.computeTimeMs += delta.computeTimeMs ?? 0;
    row.credits += delta.credits ?? 0;
    return this.afterFlush();
  }

  async getUsage(ownerId: string, day: string): Promise<DailyUsage> {
    const row = this.get.get(ownerId, day);
    const pending = this.pending.get(`${ownerId}\u0000${day}`);
    return {
      invocations: (row?.invocations ?? 0) + (pending?.invocations ?? 0),
      computeTimeMs: (row?.compute_time_ms ?? 0) + (pending?.computeTimeMs ?? 0),
      credits: (row?.credits ?? 0) + (pending?.credits ?? 0),
    };
  }

  addStored(ownerId: string, sourceId: string, _atMs: number, delta: StoredUsage): Promise<void> {
    if (!this.knownSources.has(sourceId)) {
      // At once, not with the turn's group: the trigger must find the owner as soon as the events
      // this addition counts are committed, which may be in this turn's append.
      this.recordOwner.run(sourceId, ownerId);
      this.knownSources.add(sourceId);
    }
    const pending = this.pendingStored.get(ownerId);
    if (pending) {
      pending.events += delta.events;
      pending.bytes += delta.bytes;
    } else {
      this.pendingStored.set(ownerId, { ...delta });
    }
    return this.afterFlush();
  }

  async getStored(ownerId: string): Promise<StoredUsage> {
    const row = this.getStoredRow.get(ownerId);
    const pending = this.pendingStored.get(ownerId);
    return { events: (row?.events ?? 0) + (pending?.events ?? 0), bytes: (row?.bytes ?? 0) + (pending?.bytes ?? 0) };
  }

  async countInWindow(key: string, windowStartMs: number, windowMs: number): Promise<number> {
    const id = `${key}\u0000${windowStartMs}`;
    const window = this.windows.get(id);
    if (window) return ++window.count;
    if (this.windows.size >= WINDOWS_BEFORE_SWEEP) {
      for (const [other, { endMs }] of this.windows) if (endMs <= windowStartMs) this.windows.delete(other);
    }
    this.windows.set(id, { count: 1, endMs: windowStartMs + windowMs });
    return 1;
  }

  /** Resolves once what is pending now is committed; the first waiter of a turn schedules the write. */
  private afterFlush(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      if (this.waiters.length === 1) setImmediate(this.flush);
    });
  }

  /** Writes the pending additions now (also before the database closes). */
  readonly flush = (): void => {
    const waiters = this.waiters;
    if (waiters.length === 0) return;
    const rows = this.pending;
    const stored = this.pendingStored;
    this.waiters = [];
    this.pending = new Map();
    this.pendingStored = new Map();
    try {
      this.addAll(rows.values(), stored);
    } catch (error) {
      for (const waiter of waiters) waiter.reject(error);
      return;
    }
    for (const waiter of waiters) waiter.resolve();
  };
}
