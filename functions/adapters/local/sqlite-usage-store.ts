import type { DailyUsage, UsageStore } from "#ports/usage-store";
import type { SqliteDatabase } from "./sqlite-database.ts";

/** `UsageStore` on the local SQLite file: one row per owner and day, added to in place. */
export class SqliteUsageStore implements UsageStore {
  private readonly add;
  private readonly get;

  constructor(db: SqliteDatabase) {
    this.add = db.prepare(`
      INSERT INTO usage (owner_id, day, invocations, compute_time_ms, credits) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (owner_id, day) DO UPDATE SET
        invocations = invocations + excluded.invocations,
        compute_time_ms = compute_time_ms + excluded.compute_time_ms,
        credits = credits + excluded.credits`);
    this.get = db.prepare<[string, string], { invocations: number; compute_time_ms: number; credits: number }>(
      "SELECT invocations, compute_time_ms, credits FROM usage WHERE owner_id = ? AND day = ?",
    );
  }

  async addUsage(ownerId: string, day: string, delta: Partial<DailyUsage>): Promise<void> {
    this.add.run(ownerId, day, delta.invocations ?? 0, delta.computeTimeMs ?? 0, delta.credits ?? 0);
  }

  async getUsage(ownerId: string, day: string): Promise<DailyUsage> {
    const row = this.get.get(ownerId, day);
    return { invocations: row?.invocations ?? 0, computeTimeMs: row?.compute_time_ms ?? 0, credits: row?.credits ?? 0 };
  }
}
