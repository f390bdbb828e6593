/**
 * `DelayedEmitStore` on local mode's SQLite file: one row per delayed emit waiting for its time,
 * keyed by its source and its `$in` event's id, indexed by due time (docs/events.md "Delayed
 * emits"). Rows survive a restart; the driver (`drivers/delayed-emit-driver.ts`) delivers them.
 */
import type { DelayedEmit, PolledDelayedEmitStore } from "#core/ports/delayed-emits";
import type { EmitMeta, Json } from "#runtime/protocol";
import type { SqliteDatabase } from "./sqlite-database.ts";

/**
 * The table, appended to `MIGRATIONS` in sqlite-database.ts (append only: released text never
 * changes). `in_ms`/`in_n` are the two numbers of the `$in` event's id, so a cancelled id range is
 * one indexed comparison.
 */
export const DELAYED_EMIT_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE delayed_emits (
    source_id TEXT NOT NULL,
    in_ms INTEGER NOT NULL,
    in_n INTEGER NOT NULL,
    due_ms INTEGER NOT NULL,
    channel TEXT NOT NULL,
    event TEXT NOT NULL,
    meta TEXT NOT NULL,
    PRIMARY KEY (source_id, in_ms, in_n)
  ) WITHOUT ROWID;
  CREATE INDEX delayed_emits_by_due ON delayed_emits (due_ms);
  `,
];

interface Row {
  source_id: string;
  in_ms: number;
  in_n: number;
  due_ms: number;
  channel: string;
  event: string;
  meta: string;
}

/** `<ms>-<n>` as its two numbers; ids are made by the event store, so they are well formed. */
function idParts(id: string): [number, number] {
  const [ms = "0", n = "0"] = id.split("-");
  return [Number(ms), Number(n)];
}

const LOWEST: [number, number] = [Number.MIN_SAFE_INTEGER, 0];
const HIGHEST: [number, number] = [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];

function toEntry(row: Row): DelayedEmit {
  return {
    sourceId: row.source_id,
    inEventId: `${row.in_ms}-${row.in_n}`,
    dueMs: row.due_ms,
    channel: row.channel,
    event: JSON.parse(row.event) as Json,
    meta: JSON.parse(row.meta) as EmitMeta,
  };
}

export class SqliteDelayedEmits implements PolledDelayedEmitStore {
  private readonly insert;
  private readonly count;
  private readonly dueRows;
  private readonly oneRow;
  private readonly deleteOne;
  private readonly deleteRange;
  private readonly insertAll;

  constructor(db: SqliteDatabase) {
    this.insert = db.prepare<[string, number, number, number, string, string, string]>(
      "INSERT OR REPLACE INTO delayed_emits (source_id, in_ms, in_n, due_ms, channel, event, meta) VALUES (?, ?, ?, ?, ?, ?, ?)",
    );
    this.count = db.prepare<[string], { pending: number }>(
      "SELECT COUNT(*) AS pending FROM delayed_emits WHERE source_id = ?",
    );
    this.dueRows = db.prepare<[number, number], Row>(
      "SELECT * FROM delayed_emits WHERE due_ms <= ? ORDER BY due_ms, source_id, in_ms, in_n LIMIT ?",
    );
    this.oneRow = db.prepare<[string, number, number], Row>(
      "SELECT * FROM delayed_emits WHERE source_id = ? AND in_ms = ? AND in_n = ?",
    );
    this.deleteOne = db.prepare<[string, number, number]>(
      "DELETE FROM delayed_emits WHERE source_id = ? AND in_ms = ? AND in_n = ?",
    );
    this.deleteRange = db.prepare<
      [string, number, number, number, number, number, number],
      { in_ms: number; in_n: number }
    >(
      "DELETE FROM delayed_emits WHERE source_id = ? AND (in_ms > ? OR (in_ms = ? AND in_n >= ?)) AND (in_ms < ? OR (in_ms = ? AND in_n <= ?)) RETURNING in_ms, in_n",
    );
    this.insertAll = db.transaction((entries: readonly DelayedEmit[]) => {
      for (const entry of entries) {
        const [ms, n] = idParts(entry.inEventId);
        this.insert.run(
          entry.sourceId,
          ms,
          n,
          entry.dueMs,
          entry.channel,
          JSON.stringify(entry.event),
          JSON.stringify(entry.meta),
        );
      }
    });
  }

  async add(entries: readonly DelayedEmit[]): Promise<void> {
    if (entries.length > 0) this.insertAll(entries);
  }

  async countPending(sourceId: string): Promise<number> {
    return this.count.get(sourceId)?.pending ?? 0;
  }

  async due(nowMs: number, limit: number): Promise<DelayedEmit[]> {
    return this.dueRows.all(nowMs, limit).map(toEntry);
  }

  async get(sourceId: string, inEventId: string): Promise<DelayedEmit | undefined> {
    const row = this.oneRow.get(sourceId, ...idParts(inEventId));
    return row ? toEntry(row) : undefined;
  }

  async remove(sourceId: string, inEventId: string): Promise<void> {
    this.deleteOne.run(sourceId, ...idParts(inEventId));
  }

  async removeRange(sourceId: string, fromId?: string, toId?: string): Promise<string[]> {
    const [fromMs, fromN] = fromId === undefined ? LOWEST : idParts(fromId);
    const [toMs, toN] = toId === undefined ? HIGHEST : idParts(toId);
    return this.deleteRange
      .all(sourceId, fromMs, fromMs, fromN, toMs, toMs, toN)
      .map((row) => `${row.in_ms}-${row.in_n}`);
  }
}
