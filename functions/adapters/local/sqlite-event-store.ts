import { setImmediate as nextTurn } from "node:timers/promises";
import type { NewEvent, StoredEvent } from "#core/component-model";
import { requireEventId } from "#core/event-ids";
import type { Page } from "#core/pagination";
import {
  DEFAULT_EVENT_RETENTION,
  type EventQuery,
  type EventRange,
  type EventRetention,
  type EventStore,
} from "#ports/event-store";
import type { SqliteDatabase } from "./sqlite-database.ts";
import type { SqliteOutbox } from "./sqlite-outbox.ts";

export interface SqliteEventStoreOptions {
  /** @default DEFAULT_EVENT_RETENTION */
  retention?: EventRetention;
  /**
   * `keepPerChannel` is enforced for a source after this many events were appended to it (in the
   * background, after the append), so the append itself stays one short transaction.
   * @default 1000
   */
  trimEveryAppends?: number;
  /**
   * Local mode's outbox: each append also writes, in its own transaction, a row saying its events
   * are not routed yet (sqlite-outbox.ts). None by default (the store on its own, in tests).
   */
  outbox?: Pick<SqliteOutbox, "record">;
}

/** Rows removed per statement by the background trims, so appenders wait at most one chunk. */
const TRIM_CHUNK = 2000;
/** Above any id: 15 digits of ms, 9 of n. */
const MAX_MS = 999_999_999_999_999;
const MAX_N = 999_999_999;

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

/** The last id handed out to a source: `<ms>-<n>`. */
interface LastId {
  ms: number;
  n: number;
}

/** An append waiting for the grouped write of this turn. */
interface PendingAppend {
  sourceId: string;
  events: NewEvent[];
  nowMs: number;
  resolve(stored: StoredEvent[]): void;
  reject(error: unknown): void;
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

/** The inclusive range deletes of one source, over every channel (primary key) or one (`events_by_channel`). */
function rangeDeletes(db: SqliteDatabase) {
  const range = "source_id = @sourceId AND (ms, n) >= (@fromMs, @fromN) AND (ms, n) <= (@toMs, @toN)";
  return {
    allChannels: db.prepare<object>(`DELETE FROM events WHERE ${range}`),
    oneChannel: db.prepare<object>(`DELETE FROM events WHERE ${range} AND channel = @channel`),
  };
}

/**
 * `EventStore` on the local SQLite file. Ids come from a per-source sequence row (the last
 * `<ms>-<n>` handed out), read and advanced in the same IMMEDIATE transaction that inserts the
 * events, so concurrent appenders (even in other processes) are serialised by SQLite's write lock.
 * The row outlives range deletes, so an id is never handed out twice; `deleteAllEvents` removes it.
 * The appends of one turn of the event loop share that transaction (one commit for all of them;
 * {@link appendEvents}), which is what keeps a busy local mode's cost per event low.
 *
 * With an outbox (local mode), each append also writes its outbox row in the same transaction, and
 * {@link eventsOfAppend} reads an append back for the outbox's re-dispatch (sqlite-outbox.ts).
 *
 * `deleteEvents` removes the rows at once (one indexed range DELETE), so `purgeDeletedEvents` has
 * nothing left to do. Retention runs in the background: {@link trimExpired} (called from a timer by
 * the local composition) removes events older than `maxAgeMs` and trims every channel to
 * `keepPerChannel`; the count is also enforced for a source every `trimEveryAppends` events.
 */
export class SqliteEventStore implements EventStore {
  private readonly statements;
  private readonly retention: EventRetention;
  private readonly trimEveryAppends: number;
  /** Events appended per source since its channels were last trimmed to `keepPerChannel`. */
  private readonly appendedSinceTrim = new Map<string, number>();
  private readonly trimming = new Set<string>();
  private readonly outbox: Pick<SqliteOutbox, "record"> | undefined;
  private pendingAppends: PendingAppend[] = [];
  private readonly appendTransaction;
  private readonly deleteAllTransaction;

  constructor(db: SqliteDatabase, options: SqliteEventStoreOptions = {}) {
    this.retention = { ...(options.retention ?? DEFAULT_EVENT_RETENTION) };
    this.trimEveryAppends = options.trimEveryAppends ?? 1000;
    this.outbox = options.outbox;
    this.statements = {
      sequence: db.prepare<[string], LastId>(
        "SELECT last_ms AS ms, last_n AS n FROM event_sequences WHERE source_id = ?",
      ),
      advance: db.prepare<[string, number, number]>(
        `INSERT INTO event_sequences (source_id, last_ms, last_n) VALUES (?, ?, ?)
         ON CONFLICT (source_id) DO UPDATE SET last_ms = excluded.last_ms, last_n = excluded.last_n`,
      ),
      insert: db.prepare<[string, number, number, string, number, string, string, string]>(
        `INSERT INTO events (source_id, ms, n, channel, indexed_at_ms, event, emit_id, meta)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      ofAppend: db.prepare<[string, number, number, number], EventRow>(
        "SELECT * FROM events WHERE source_id = ? AND ms = ? AND n >= ? AND n <= ? ORDER BY n",
      ),
      deleteEvents: db.prepare<[string]>("DELETE FROM events WHERE source_id = ?"),
      deleteSequence: db.prepare<[string]>("DELETE FROM event_sequences WHERE source_id = ?"),
      allChannels: listStatements(db, false),
      oneChannel: listStatements(db, true),
      rangeDeletes: rangeDeletes(db),
      sources: db.prepare<[], { source_id: string }>("SELECT source_id FROM event_sequences"),
      // One index step per channel (a loose index scan), however many events each holds.
      nextChannel: db.prepare<[string, string], { channel: string }>(
        "SELECT channel FROM events WHERE source_id = ? AND channel > ? ORDER BY channel LIMIT 1",
      ),
      firstChannel: db.prepare<[string], { channel: string }>(
        "SELECT channel FROM events WHERE source_id = ? ORDER BY channel LIMIT 1",
      ),
      // The newest event of a channel beyond the ones kept: it and everything older go.
      keptBoundary: db.prepare<[string, string, number], { ms: number; n: number }>(
        "SELECT ms, n FROM events WHERE source_id = ? AND channel = ? ORDER BY ms DESC, n DESC LIMIT 1 OFFSET ?",
      ),
      trimChannelChunk: db.prepare<[string, string, number, number]>(
        `DELETE FROM events WHERE rowid IN (SELECT rowid FROM events
         WHERE source_id = ? AND channel = ? AND (ms, n) <= (?, ?) LIMIT ${TRIM_CHUNK})`,
      ),
      expireChunk: db.prepare<[string, number]>(
        `DELETE FROM events WHERE rowid IN (SELECT rowid FROM events
         WHERE source_id = ? AND ms < ? LIMIT ${TRIM_CHUNK})`,
      ),
    };
    this.appendTransaction = db.transaction((batch: PendingAppend[]) => {
      // Each source's sequence row is read once and written once per transaction, however many
      // of its appends the batch holds.
      const lastIds = new Map<string, LastId>();
      const stored = batch.map((append) => this.insertAppend(append, lastIds));
      for (const [sourceId, { ms, n }] of lastIds) this.statements.advance.run(sourceId, ms, n);
      return stored;
    });
    this.deleteAllTransaction = db.transaction((sourceId: string) => {
      this.statements.deleteEvents.run(sourceId);
      this.statements.deleteSequence.run(sourceId);
    });
  }

  /**
   * Appends are grouped: those made in one turn of the event loop are written in ONE transaction
   * (`setImmediate`), each with its outbox row, and each caller gets its own events back. They are
   * applied in call order, so a source's ids follow the order of its calls, and resolved in that
   * order (after the commit), so publishes that follow each append directly come in id order.
   */
  appendEvents(sourceId: string, events: NewEvent[], nowMs: number): Promise<StoredEvent[]> {
    if (events.length === 0) return Promise.resolve([]);
    return new Promise<StoredEvent[]>((resolve, reject) => {
      this.pendingAppends.push({ sourceId, events, nowMs, resolve, reject });
      if (this.pendingAppends.length === 1) setImmediate(this.flushAppends);
    });
  }

  /**
   * Writes the pending appends now. Reads and deletes call it first, so they see every append
   * called before them, as if appends were written at once.
   */
  readonly flushAppends = (): void => {
    const batch = this.pendingAppends;
    if (batch.length === 0) return;
    this.pendingAppends = [];
    let stored: StoredEvent[][];
    try {
      stored = this.appendTransaction.immediate(batch);
    } catch {
      // One failed append must not fail the others: each is tried again in its own transaction.
      for (const append of batch) {
        try {
          append.resolve(this.appendTransaction.immediate([append])[0] as StoredEvent[]);
          this.countAppended(append.sourceId, append.events.length);
        } catch (error) {
          append.reject(error);
        }
      }
      return;
    }
    batch.forEach((append, index) => {
      append.resolve(stored[index] as StoredEvent[]);
      this.countAppended(append.sourceId, append.events.length);
    });
  };

  /**
   * Inserts one append's events, notes the append in the outbox and its last id in `lastIds` (the
   * transaction's view of the sequences, written to them once at its end).
   */
  private insertAppend({ sourceId, events, nowMs }: PendingAppend, lastIds: Map<string, LastId>): StoredEvent[] {
    const s = this.statements;
    const last = lastIds.get(sourceId) ?? s.sequence.get(sourceId);
    const ms = last && last.ms >= nowMs ? last.ms : nowMs;
    const firstN = last && last.ms === ms ? last.n + 1 : 0;
    const stored: StoredEvent[] = [];
    for (let index = 0; index < events.length; index++) {
      const event = events[index] as NewEvent;
      const n = firstN + index;
      s.insert.run(
        sourceId,
        ms,
        n,
        event.channel,
        nowMs,
        JSON.stringify(event.event),
        event.emitId,
        JSON.stringify(event.meta),
      );
      stored.push({
        sourceId,
        id: `${ms}-${n}`,
        indexedAtMs: nowMs,
        channel: event.channel,
        event: event.event,
        emitId: event.emitId,
        meta: event.meta,
      });
    }
    lastIds.set(sourceId, { ms, n: firstN + events.length - 1 });
    this.outbox?.record(sourceId, ms, firstN, firstN + events.length - 1, nowMs);
    return stored;
  }

  async listEvents(sourceId: string, query: EventQuery): Promise<Page<StoredEvent>> {
    this.flushAppends();
    const statements = query.channel === undefined ? this.statements.allChannels : this.statements.oneChannel;
    const params = { sourceId, channel: query.channel, limit: query.limit };
    let rows: EventRow[];
    if (query.after !== undefined) {
      const [ms, n] = requireEventId(query.after, "after");
      rows = statements.after.all({ ...params, ms, n });
    } else if (query.before !== undefined) {
      const [ms, n] = requireEventId(query.before, "before");
      rows = statements.before.all({ ...params, ms, n }).reverse();
    } else {
      rows = statements.first.all(params);
    }
    // count(*) walks the source's (or channel's) index entries: proportional to what retention keeps.
    const totalCount = query.count === false ? 0 : (statements.count.get(params)?.total ?? 0);
    return { items: rows.map(toEvent), totalCount };
  }

  async deleteEvents(sourceId: string, range: EventRange): Promise<void> {
    this.flushAppends();
    const [fromMs, fromN] = range.fromId === undefined ? [0, 0] : requireEventId(range.fromId, "fromId");
    // Without an end, up to the newest: appends are serialised with this statement by the write
    // lock, so one that commits after it has larger ids and is not touched.
    const [toMs, toN] = range.toId === undefined ? [MAX_MS, MAX_N] : requireEventId(range.toId, "toId");
    const params = { sourceId, fromMs, fromN, toMs, toN };
    if (range.channel === undefined) this.statements.rangeDeletes.allChannels.run(params);
    else this.statements.rangeDeletes.oneChannel.run({ ...params, channel: range.channel });
  }

  /**
   * The events of one append still stored, in id order: `<ms>-<firstN>` to `<ms>-<lastN>` (every
   * event of an append shares its ms). Local mode only: the outbox reads appends back with it.
   */
  eventsOfAppend(sourceId: string, ms: number, firstN: number, lastN: number): StoredEvent[] {
    this.flushAppends();
    return this.statements.ofAppend.all(sourceId, ms, firstN, lastN).map(toEvent);
  }

  /** Nothing to do: `deleteEvents` removed the rows already. */
  async purgeDeletedEvents(_sourceId: string): Promise<void> {}

  async deleteAllEvents(sourceId: string): Promise<void> {
    this.flushAppends();
    this.deleteAllTransaction(sourceId);
    this.appendedSinceTrim.delete(sourceId);
  }

  /**
   * Applies the retention as of `nowMs` to every source: removes events whose id's ms is more than
   * `maxAgeMs` before `nowMs`, then trims each channel to its newest `keepPerChannel`. Deletes in
   * chunks of a few thousand rows and yields to the event loop between them, so appends and reads
   * go on meanwhile. The local composition calls it from a timer (every minute or so); a run that
   * overlaps another is harmless. Returns how many events it removed.
   */
  async trimExpired(nowMs: number): Promise<number> {
    this.flushAppends();
    let removed = 0;
    const sources = this.statements.sources.all().map((row) => row.source_id);
    for (const sourceId of sources) {
      if (this.retention.maxAgeMs > 0) {
        removed += await this.inChunks(() =>
          this.statements.expireChunk.run(sourceId, nowMs - this.retention.maxAgeMs),
        );
      }
      removed += await this.trimSource(sourceId);
    }
    return removed;
  }

  /** Trims each channel of a source to its newest `keepPerChannel` events; the count removed. */
  private async trimSource(sourceId: string): Promise<number> {
    const keep = this.retention.keepPerChannel;
    if (keep <= 0) return 0;
    let removed = 0;
    const s = this.statements;
    let channel = s.firstChannel.get(sourceId)?.channel;
    while (channel !== undefined) {
      const boundary = s.keptBoundary.get(sourceId, channel, keep);
      if (boundary) {
        const name = channel;
        removed += await this.inChunks(() => s.trimChannelChunk.run(sourceId, name, boundary.ms, boundary.n));
      }
      channel = s.nextChannel.get(sourceId, channel)?.channel;
    }
    return removed;
  }

  /** Runs a chunked DELETE until it removes less than a chunk, yielding between chunks. */
  private async inChunks(deleteChunk: () => { changes: number }): Promise<number> {
    let removed = 0;
    for (;;) {
      const { changes } = deleteChunk();
      removed += changes;
      if (changes < TRIM_CHUNK) return removed;
      await nextTurn();
    }
  }

  /** Starts a background count trim of a source once every `trimEveryAppends` appended events. */
  private countAppended(sourceId: string, count: number): void {
    if (this.retention.keepPerChannel <= 0) return;
    const total = (this.appendedSinceTrim.get(sourceId) ?? 0) + count;
    if (total < this.trimEveryAppends || this.trimming.has(sourceId)) {
      this.appendedSinceTrim.set(sourceId, total);
      return;
    }
    this.appendedSinceTrim.set(sourceId, 0);
    this.trimming.add(sourceId);
    // After the append has answered; a failure (the file busy past the timeout) is retried by the
    // next trigger or by the next `trimExpired`.
    setImmediate(() => {
      this.trimSource(sourceId)
        .catch(() => this.appendedSinceTrim.set(sourceId, this.trimEveryAppends))
        .finally(() => this.trimming.delete(sourceId));
    });
  }
}
