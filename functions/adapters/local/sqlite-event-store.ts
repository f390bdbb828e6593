import type { NewEvent, StoredEvent } from "#core/component-model";
import { invalid } from "#core/errors";
import type { Page } from "#core/pagination";
import type { EventQuery, EventStore } from "#ports/event-store";
import type { SqliteDatabase } from "./sqlite-database.ts";

interface EventRow {
  source_id: string;
  ms: number;
  n: number;
  channel: string;
  indexed_at_ms: number;
  event: string;
  emit_id: string;
  meta: string;
}

const toEvent = (row: EventRow): StoredEvent => ({
  sourceId: row.source_id,
  id: `${row.ms}-${row.n}`,
  indexedAtMs: row.indexed_at_ms,
  channel: row.channel,
  event: JSON.parse(row.event),
  emitId: row.emit_id,
  meta: JSON.parse(row.meta),
});

/** `<ms>-<n>` as numbers. The core validates cursors; this only refuses what it cannot order. */
function parseEventId(id: string, field: string): [number, number] {
  const match = /^(\d{1,15})-(\d{1,9})$/.exec(id);
  if (!match) throw invalid(field, "is not an event id");
  return [Number(match[1]), Number(match[2])];
}

/** The statements of one newest-first list, with or without a channel. */
function listStatements(db: SqliteDatabase, channel: boolean) {
  // Without a channel: every channel but the reserved `$logs`, `$errors`, ... (they start with `$`).
  const where = channel
    ? "source_id = @sourceId AND channel = @channel"
    : "source_id = @sourceId AND substr(channel, 1, 1) <> '$'";
  return {
    first: db.prepare<object, EventRow>(`SELECT * FROM events WHERE ${where} ORDER BY ms DESC, n DESC LIMIT @limit`),
    after: db.prepare<object, EventRow>(
      `SELECT * FROM events WHERE ${where} AND (ms, n) < (@ms, @n) ORDER BY ms DESC, n DESC LIMIT @limit`,
    ),
    before: db.prepare<object, EventRow>(
      `SELECT * FROM events WHERE ${where} AND (ms, n) > (@ms, @n) ORDER BY ms ASC, n ASC LIMIT @limit`,
    ),
    count: db.prepare<object, { total: number }>(`SELECT count(*) AS total FROM events WHERE ${where}`),
  };
}

/**
 * `EventStore` on the local SQLite file. Ids come from a per-source sequence row (the last
 * `<ms>-<n>` handed out), read and advanced in the same IMMEDIATE transaction that inserts the
 * events, so concurrent appenders (even in other processes) are serialised by SQLite's write lock.
 * The row outlives range deletes, so an id is never handed out twice; `deleteAllEvents` removes it.
 */
export class SqliteEventStore implements EventStore {
  private readonly statements;

  constructor(private readonly db: SqliteDatabase) {
    this.statements = {
      sequence: db.prepare<[string], { last_ms: number; last_n: number }>(
        "SELECT last_ms, last_n FROM event_sequences WHERE source_id = ?",
      ),
      advance: db.prepare<[string, number, number]>(
        `INSERT INTO event_sequences (source_id, last_ms, last_n) VALUES (?, ?, ?)
         ON CONFLICT (source_id) DO UPDATE SET last_ms = excluded.last_ms, last_n = excluded.last_n`,
      ),
      insert: db.prepare(
        `INSERT INTO events (source_id, ms, n, channel, indexed_at_ms, event, emit_id, meta)
         VALUES (@sourceId, @ms, @n, @channel, @indexedAtMs, @event, @emitId, @meta)`,
      ),
      deleteEvents: db.prepare<[string]>("DELETE FROM events WHERE source_id = ?"),
      deleteSequence: db.prepare<[string]>("DELETE FROM event_sequences WHERE source_id = ?"),
      allChannels: listStatements(db, false),
      oneChannel: listStatements(db, true),
    };
  }

  async appendEvents(sourceId: string, events: NewEvent[], nowMs: number): Promise<StoredEvent[]> {
    if (events.length === 0) return [];
    const s = this.statements;
    return this.db
      .transaction(() => {
        const last = s.sequence.get(sourceId);
        const ms = last && last.last_ms >= nowMs ? last.last_ms : nowMs;
        const firstN = last && last.last_ms === ms ? last.last_n + 1 : 0;
        const stored = events.map(
          (event, index): StoredEvent => ({
            sourceId,
            id: `${ms}-${firstN + index}`,
            indexedAtMs: nowMs,
            channel: event.channel,
            event: event.event,
            emitId: event.emitId,
            meta: event.meta,
          }),
        );
        stored.forEach((event, index) => {
          s.insert.run({
            sourceId,
            ms,
            n: firstN + index,
            channel: event.channel,
            indexedAtMs: nowMs,
            event: JSON.stringify(event.event),
            emitId: event.emitId,
            meta: JSON.stringify(event.meta),
          });
        });
        s.advance.run(sourceId, ms, firstN + events.length - 1);
        return stored;
      })
      .immediate();
  }

  async listEvents(sourceId: string, query: EventQuery): Promise<Page<StoredEvent>> {
    const statements = query.channel === undefined ? this.statements.allChannels : this.statements.oneChannel;
    const params = { sourceId, channel: query.channel, limit: query.limit };
    let rows: EventRow[];
    if (query.after !== undefined) {
      const [ms, n] = parseEventId(query.after, "after");
      rows = statements.after.all({ ...params, ms, n });
    } else if (query.before !== undefined) {
      const [ms, n] = parseEventId(query.before, "before");
      rows = statements.before.all({ ...params, ms, n }).reverse();
    } else {
      rows = statements.first.all(params);
    }
    const totalCount = statements.count.get(params)?.total ?? 0;
    return { items: rows.map(toEvent), totalCount };
  }

  async deleteAllEvents(sourceId: string): Promise<void> {
    this.db.transaction(() => {
      this.statements.deleteEvents.run(sourceId);
      this.statements.deleteSequence.run(sourceId);
    })();
  }
}
