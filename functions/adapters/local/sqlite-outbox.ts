/**
 * Local mode's outbox: what makes routing survive a hard kill (docs/durability.md).
 *
 * `SqliteEventStore`, given a {@link SqliteOutbox}, writes one outbox row per append in the
 * append's own transaction: the events and the note that they still have to be routed are stored
 * together or not at all. The outbox relay (`functions/local-mode/drivers/outbox-relay.ts`) routes
 * them and removes each row once every delivery and run is queued; rows that remain are routed
 * again from the events read back.
 */
import type { SqliteDatabase } from "./sqlite-database.ts";

/** One append not yet routed: the events `<ms>-<firstN>` to `<ms>-<lastN>` of a source. */
export interface OutboxEntry {
  sourceId: string;
  ms: number;
  firstN: number;
  lastN: number;
  /** When the append was made (epoch ms). */
  createdAt: number;
}

interface OutboxRow {
  source_id: string;
  ms: number;
  first_n: number;
  last_n: number;
  created_at: number;
}

const toEntry = (row: OutboxRow): OutboxEntry => ({
  sourceId: row.source_id,
  ms: row.ms,
  firstN: row.first_n,
  lastN: row.last_n,
  createdAt: row.created_at,
});

function prepare(db: SqliteDatabase) {
  return {
    record: db.prepare<[string, number, number, number, number]>(
      "INSERT OR REPLACE INTO event_outbox (source_id, ms, first_n, last_n, created_at) VALUES (?, ?, ?, ?, ?)",
    ),
    remove: db.prepare<[string, number, number]>(
      "DELETE FROM event_outbox WHERE source_id = ? AND ms = ? AND first_n = ?",
    ),
    first: db.prepare<[number, number], OutboxRow>(
      `SELECT * FROM event_outbox WHERE created_at < ?
       ORDER BY source_id, ms, first_n LIMIT ?`,
    ),
    after: db.prepare<[string, number, number, number, number], OutboxRow>(
      `SELECT * FROM event_outbox WHERE (source_id, ms, first_n) > (?, ?, ?) AND created_at < ?
       ORDER BY source_id, ms, first_n LIMIT ?`,
    ),
    count: db.prepare<[], { total: number }>("SELECT count(*) AS total FROM event_outbox"),
  };
}

/** How long removals that could not be written wait before they are tried again. */
const RETRY_REMOVALS_MS = 1_000;

/**
 * The `event_outbox` table (sqlite-outbox-schema.ts). {@link record} runs inside the append's
 * transaction; {@link remove} is grouped: the rows of the appends routed within `removeDelayMs` go
 * in one transaction (a crash before it only means a second dispatch, which is harmless).
 */
export class SqliteOutbox {
  private readonly statements: ReturnType<typeof prepare>;
  private pendingRemovals: [string, number, number][] = [];
  private flushTimer: NodeJS.Timeout | undefined;
  private readonly removeAll;

  constructor(
    private readonly db: SqliteDatabase,
    private readonly options: { removeDelayMs?: number } = {},
  ) {
    this.statements = prepare(db);
    this.removeAll = db.transaction((removals: [string, number, number][]) => {
      for (const [sourceId, ms, firstN] of removals) this.statements.remove.run(sourceId, ms, firstN);
    });
  }

  /** Notes an append of `<ms>-<firstN>` to `<ms>-<lastN>`. Call it inside the append's transaction. */
  record(sourceId: string, ms: number, firstN: number, lastN: number, createdAt: number): void {
    this.statements.record.run(sourceId, ms, firstN, lastN, createdAt);
  }

  /**
   * The append whose first event is `<ms>-<firstN>` is routed: its row goes with the next grouped
   * write, within `removeDelayMs` (default 10).
   */
  remove(sourceId: string, ms: number, firstN: number): void {
    this.pendingRemovals.push([sourceId, ms, firstN]);
    if (this.flushTimer) return;
    this.flushTimer = setTimeout(() => this.flush(), this.options.removeDelayMs ?? 10);
    this.flushTimer.unref();
  }

  /**
   * Writes the pending removals now (also called before the database closes). Never throws: when
   * the data dir cannot take the write, the removals are tried again a second later (a row left
   * behind at a stop only means its events are routed once more at the next start).
   */
  flush(): void {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const removals = this.pendingRemovals;
    if (removals.length === 0 || !this.db.open) return;
    this.pendingRemovals = [];
    try {
      this.removeAll(removals);
    } catch {
      this.pendingRemovals = removals.concat(this.pendingRemovals);
      this.flushTimer = setTimeout(() => this.flush(), RETRY_REMOVALS_MS);
      this.flushTimer.unref();
    }
  }

  /** Up to `limit` rows of appends made before `createdBefore`, in key order, after the row `after`. */
  list(createdBefore: number, limit: number, after?: OutboxEntry): OutboxEntry[] {
    const rows = after
      ? this.statements.after.all(after.sourceId, after.ms, after.firstN, createdBefore, limit)
      : this.statements.first.all(createdBefore, limit);
    return rows.map(toEntry);
  }

  /** Rows in the outbox (tests, diagnostics). */
  size(): number {
    return this.statements.count.get()?.total ?? 0;
  }
}
