import type { DailyUsage, UsageStore } from "#ports/usage-store";
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

/**
 * `UsageStore` on the local SQLite file: one row per owner and day, added to in place.
 *
 * Additions are grouped: those of one turn of the event loop are summed per owner and day in
 * memory and written in ONE transaction (`setImmediate`), so a busy local mode pays one commit per
 * turn rather than one per run. `addUsage` resolves once its addition is committed, so a run whose
 * usage was counted has it on disk; {@link getUsage} writes what is pending first.
 */
export class SqliteUsageStore implements UsageStore {
  private readonly get;
  private readonly addAll;
  private pending = new Map<string, PendingUsage>();
  private waiters: Waiter[] = [];

  constructor(db: SqliteDatabase) {
    const add = db.prepare<[string, string, number, number, number]>(`
      INSERT INTO usage (owner_id, day, invocations, compute_time_ms, credits) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (owner_id, day) DO UPDATE SET
        invocations = invocations + excluded.invocations,
        compute_time_ms = compute_time_ms + excluded.compute_time_ms,
        credits = credits + excluded.credits`);
    this.addAll = db.transaction((rows: Iterable<PendingUsage>) => {
      for (const row of rows) add.run(row.ownerId, row.day, row.invocations, row.computeTimeMs, row.credits);
    });
    this.get = db.prepare<[string, string], { invocations: number; compute_time_ms: number; credits: number }>(
      "SELECT invocations, compute_time_ms, credits FROM usage WHERE owner_id = ? AND day = ?",
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
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      if (this.waiters.length === 1) setImmediate(this.flush);
    });
  }

  async getUsage(ownerId: string, day: string): Promise<DailyUsage> {
    this.flush();
    const row = this.get.get(ownerId, day);
    return { invocations: row?.invocations ?? 0, computeTimeMs: row?.compute_time_ms ?? 0, credits: row?.credits ?? 0 };
  }

  /** Writes the pending additions now (also before the database closes). */
  readonly flush = (): void => {
    const waiters = this.waiters;
    if (waiters.length === 0) return;
    const rows = this.pending;
    this.waiters = [];
    this.pending = new Map();
    try {
      this.addAll(rows.values());
    } catch (error) {
      for (const waiter of waiters) waiter.reject(error);
      return;
    }
    for (const waiter of waiters) waiter.resolve();
  };
}
