import type { NewEvent, StoredEvent } from "#core/component-model";
import { compareEventIds, requireEventId } from "#core/event-ids";
import type { Page } from "#core/pagination";
import {
  DEFAULT_EVENT_RETENTION,
  type EventQuery,
  type EventRange,
  type EventRetention,
  type EventStore,
} from "#core/ports/event-store";
import { nextTurn, TurnBudget } from "./event-loop.ts";
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
  /**
   * Events removed per transaction by deletions and retention, one such chunk per turn of the
   * event loop: about 3-4 ms of work on a 2-core machine, which is what anyone else may wait
   * (1,000 took twice as long per turn for 5-10% less time in all).
   * @default 500
   */
  chunkRows?: number;
}

/** Channels whose counts are read per step of a retention trim. */
const CHANNEL_PAGE = 256;

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

/** What one grouped append adds to a source's counts: per channel, and to its listed channels. */
interface Added {
  perChannel: Map<string, number>;
  listed: number;
}

/** Whether lists without `event_name` show a channel: all but the reserved `$logs`, `$errors`, ... */
const isListed = (channel: string) => !channel.startsWith("$");

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

/**
 * The statements of one newest-first list, with or without a channel. Each reads an index in id
 * order from the cursor and stops at `limit` rows, every one of which it returns: one channel
 * through `events_by_channel`, the listed channels through the partial index `events_listed`
 * (sqlite-event-schema.ts), so `$logs` between them are never read.
 */
function listStatements(db: SqliteDatabase, channel: boolean) {
  const from = channel
    ? "events WHERE source_id = @sourceId AND channel = @channel"
    : "events INDEXED BY events_listed WHERE source_id = @sourceId AND substr(channel, 1, 1) <> '$'";
  return {
    first: db.prepare<object, EventRow>(`SELECT * FROM ${from} ORDER BY ms DESC, n DESC LIMIT @limit`),
    after: db.prepare<object, EventRow>(
      `SELECT * FROM ${from} AND (ms, n) < (@ms, @n) ORDER BY ms DESC, n DESC LIMIT @limit`,
    ),
    before: db.prepare<object, EventRow>(
      `SELECT * FROM ${from} AND (ms, n) > (@ms, @n) ORDER BY ms ASC, n ASC LIMIT @limit`,
    ),
  };
}

/**
 * One chunk of each kind of deletion: at most `chunk` rows, oldest first, returning the channel of
 * each row removed (for the counts). LIMIT is a literal: SQLite plans a bound one less well.
 */
function chunkDeletes(db: SqliteDatabase, chunk: number) {
  const deleteWhere = (where: string, limit = String(chunk)) =>
    db.prepare<object, { channel: string }>(
      `DELETE FROM events WHERE rowid IN (SELECT rowid FROM events WHERE ${where} ORDER BY ms, n LIMIT ${limit})
       RETURNING channel`,
    );
  const range = "source_id = @sourceId AND (ms, n) >= (@fromMs, @fromN) AND (ms, n) <= (@toMs, @toN)";
  return {
    range: deleteWhere(range),
    rangeOfChannel: deleteWhere(`${range} AND channel = @channel`),
    everything: deleteWhere("source_id = @sourceId"),
    expired: deleteWhere("source_id = @sourceId AND ms < @beforeMs"),
    // The oldest `limit` (up to a chunk) of a channel: what a trim to `keepPerChannel` removes.
    oldestOfChannel: deleteWhere("source_id = @sourceId AND channel = @channel", "@limit"),
  };
}

type ChunkDelete = ReturnType<typeof chunkDeletes>["range"];

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
 * Nothing here holds the event loop for a time that grows with a source's history (local mode
 * serves every tenant from one thread): each channel's count is kept in `event_counts` by the
 * transactions that insert and delete events, so `totalCount` is one row read; lists read only the
 * rows they return; and every deletion (a range, a whole source, retention) removes `chunkRows`
 * events per transaction, oldest first, with a turn of the event loop between chunks. So
 * `deleteEvents` resolves once its range is gone, and `purgeDeletedEvents` has nothing left to do.
 * Retention runs in the background: {@link trimExpired} (called from a timer by the local
 * composition) removes events older than `maxAgeMs` and trims every channel to `keepPerChannel`;
 * the count is also enforced for a source every `trimEveryAppends` events.
 */
export class SqliteEventStore implements EventStore {
  private readonly statements;
  private readonly deletes;
  private readonly retention: EventRetention;
  private readonly trimEveryAppends: number;
  private readonly chunkRows: number;
  /** Events appended per source since its channels were last trimmed to `keepPerChannel`. */
  private readonly appendedSinceTrim = new Map<string, number>();
  private readonly trimming = new Set<string>();
  private readonly outbox: Pick<SqliteOutbox, "record"> | undefined;
  private pendingAppends: PendingAppend[] = [];
  private readonly appendTransaction;
  private readonly removeChunk;
  private readonly removeLastChunk;

  constructor(
    private readonly db: SqliteDatabase,
    options: SqliteEventStoreOptions = {},
  ) {
    this.retention = { ...(options.retention ?? DEFAULT_EVENT_RETENTION) };
    this.trimEveryAppends = options.trimEveryAppends ?? 1000;
    this.chunkRows = Math.max(1, Math.floor(options.chunkRows ?? 500));
    this.outbox = options.outbox;
    this.statements = {
      sequence: db.prepare<[string], LastId>(
        "SELECT last_ms AS ms, last_n AS n FROM event_sequences WHERE source_id = ?",
      ),
      advance: db.prepare<[string, number, number, number]>(
        `INSERT INTO event_sequences (source_id, last_ms, last_n, listed) VALUES (?, ?, ?, ?)
         ON CONFLICT (source_id) DO UPDATE
         SET last_ms = excluded.last_ms, last_n = excluded.last_n, listed = listed + excluded.listed`,
      ),
      insert: db.prepare<[string, number, number, string, number, string, string, string]>(
        `INSERT INTO events (source_id, ms, n, channel, indexed_at_ms, event, emit_id, meta)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      ofAppend: db.prepare<[string, number, number, number], EventRow>(
        "SELECT * FROM events WHERE source_id = ? AND ms = ? AND n >= ? AND n <= ? ORDER BY n",
      ),
      addCount: db.prepare<[string, string, number]>(
        `INSERT INTO event_counts (source_id, channel, total) VALUES (?, ?, ?)
         ON CONFLICT (source_id, channel) DO UPDATE SET total = total + excluded.total`,
      ),
      subtractCount: db.prepare<[number, string, string], { total: number }>(
        "UPDATE event_counts SET total = total - ? WHERE source_id = ? AND channel = ? RETURNING total",
      ),
      dropCount: db.prepare<[string, string]>("DELETE FROM event_counts WHERE source_id = ? AND channel = ?"),
      subtractListed: db.prepare<[number, string]>(
        "UPDATE event_sequences SET listed = listed - ? WHERE source_id = ?",
      ),
      channelCount: db.prepare<[string, string], { total: number }>(
        "SELECT total FROM event_counts WHERE source_id = ? AND channel = ?",
      ),
      listedCount: db.prepare<[string], { total: number }>(
        "SELECT listed AS total FROM event_sequences WHERE source_id = ?",
      ),
      // Channels holding more than `keep` events, a page at a time in name order.
      firstOverfull: db.prepare<[string, number], { channel: string; total: number }>(
        `SELECT channel, total FROM event_counts WHERE source_id = ? AND total > ?
         ORDER BY channel LIMIT ${CHANNEL_PAGE}`,
      ),
      nextOverfull: db.prepare<[string, string, number], { channel: string; total: number }>(
        `SELECT channel, total FROM event_counts WHERE source_id = ? AND channel > ? AND total > ?
         ORDER BY channel LIMIT ${CHANNEL_PAGE}`,
      ),
      deleteCounts: db.prepare<[string]>("DELETE FROM event_counts WHERE source_id = ?"),
      deleteSequence: db.prepare<[string]>("DELETE FROM event_sequences WHERE source_id = ?"),
      allChannels: listStatements(db, false),
      oneChannel: listStatements(db, true),
      sources: db.prepare<[], { source_id: string }>("SELECT source_id FROM event_sequences"),
    };
    this.deletes = chunkDeletes(db, this.chunkRows);
    this.appendTransaction = db.transaction((batch: PendingAppend[]) => {
      // Each source's sequence row is read once and written once per transaction, however many
      // of its appends the batch holds; its counts likewise.
      const lastIds = new Map<string, LastId>();
      const added = new Map<string, Added>();
      const stored = batch.map((append) => this.insertAppend(append, lastIds, added));
      for (const [sourceId, { ms, n }] of lastIds) {
        const counts = added.get(sourceId) as Added;
        this.statements.advance.run(sourceId, ms, n, counts.listed);
        for (const [channel, count] of counts.perChannel) this.statements.addCount.run(sourceId, channel, count);
      }
      return stored;
    });
    this.removeChunk = db.transaction(
      (sourceId: string, statement: ChunkDelete, params: Record<string, unknown>): number => {
        const removed = statement.all({ ...params, sourceId });
        this.subtractCounts(sourceId, removed);
        return removed.length;
      },
    );
    // The last chunk of a source's deletion also forgets its sequence, in the same transaction, so
    // an event appended meanwhile is either removed or keeps its sequence.
    this.removeLastChunk = db.transaction((sourceId: string): number => {
      const removed = this.removeChunk(sourceId, this.deletes.everything, {});
      if (removed < this.chunkRows) {
        this.statements.deleteCounts.run(sourceId);
        this.statements.deleteSequence.run(sourceId);
      }
      return removed;
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
   * Inserts one append's events, notes the append in the outbox, its last id in `lastIds` and its
   * counts in `added` (the transaction's view of the sequences and counts, written at its end).
   */
  private insertAppend(
    { sourceId, events, nowMs }: PendingAppend,
    lastIds: Map<string, LastId>,
    added: Map<string, Added>,
  ): StoredEvent[] {
    const s = this.statements;
    const last = lastIds.get(sourceId) ?? s.sequence.get(sourceId);
    const ms = last && last.ms >= nowMs ? last.ms : nowMs;
    const firstN = last && last.ms === ms ? last.n + 1 : 0;
    let counts = added.get(sourceId);
    if (!counts) {
      counts = { perChannel: new Map(), listed: 0 };
      added.set(sourceId, counts);
    }
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
        event.eventJson ?? JSON.stringify(event.event),
        event.emitId,
        JSON.stringify(event.meta),
      );
      counts.perChannel.set(event.channel, (counts.perChannel.get(event.channel) ?? 0) + 1);
      if (isListed(event.channel)) counts.listed++;
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

  /** Takes the rows one deletion removed off their channels' counts (inside its transaction). */
  private subtractCounts(sourceId: string, removed: readonly { channel: string }[]): void {
    if (removed.length === 0) return;
    const perChannel = new Map<string, number>();
    for (const { channel } of removed) perChannel.set(channel, (perChannel.get(channel) ?? 0) + 1);
    let listed = 0;
    for (const [channel, count] of perChannel) {
      const left = this.statements.subtractCount.get(count, sourceId, channel);
      if (left !== undefined && left.total <= 0) this.statements.dropCount.run(sourceId, channel);
      if (isListed(channel)) listed += count;
    }
    if (listed > 0) this.statements.subtractListed.run(listed, sourceId);
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
    return { items: rows.map(toEvent), totalCount: query.count === false ? 0 : this.countOf(sourceId, query.channel) };
  }

  /** The events a list of `channel` (or of the listed channels) holds: one row, kept by every write. */
  private countOf(sourceId: string, channel: string | undefined): number {
    const row =
      channel === undefined
        ? this.statements.listedCount.get(sourceId)
        : this.statements.channelCount.get(sourceId, channel);
    return Math.max(0, row?.total ?? 0);
  }

  /**
   * Removes the range a chunk per turn, oldest first, and resolves once it is gone. The range ends
   * at the newest event when the call is made: appends that come while it runs take larger ids.
   */
  async deleteEvents(sourceId: string, range: EventRange): Promise<void> {
    const from = range.fromId === undefined ? ([0, 0] as const) : requireEventId(range.fromId, "fromId");
    const requestedTo = range.toId === undefined ? undefined : requireEventId(range.toId, "toId");
    this.flushAppends();
    const newest = this.statements.sequence.get(sourceId);
    if (!newest) return;
    const to =
      requestedTo && compareEventIds(range.toId as string, `${newest.ms}-${newest.n}`) < 0
        ? requestedTo
        : ([newest.ms, newest.n] as const);
    const params = { fromMs: from[0], fromN: from[1], toMs: to[0], toN: to[1] };
    if (range.channel === undefined) await this.inChunks(sourceId, this.deletes.range, params);
    else await this.inChunks(sourceId, this.deletes.rangeOfChannel, { ...params, channel: range.channel });
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

  /** Removes every event of the source a chunk per turn; the last chunk forgets its sequence. */
  async deleteAllEvents(sourceId: string): Promise<void> {
    this.flushAppends();
    for (;;) {
      this.requireOpen();
      if (this.removeLastChunk(sourceId) < this.chunkRows) break;
      await nextTurn();
    }
    this.appendedSinceTrim.delete(sourceId);
  }

  /**
   * Applies the retention as of `nowMs` to every source: removes events whose id's ms is more than
   * `maxAgeMs` before `nowMs`, then trims each channel to its newest `keepPerChannel`. Deletes a
   * chunk per turn of the event loop, and yields between sources every few ms, so appends and
   * reads go on meanwhile. The local composition calls it from a timer (every minute or so); a run
   * that overlaps another is harmless. Returns how many events it removed.
   */
  async trimExpired(nowMs: number): Promise<number> {
    this.flushAppends();
    let removed = 0;
    const budget = new TurnBudget();
    const sources = this.statements.sources.all().map((row) => row.source_id);
    for (const sourceId of sources) {
      if (!this.db.open) break;
      if (this.retention.maxAgeMs > 0) {
        removed += await this.inChunks(sourceId, this.deletes.expired, {
          beforeMs: nowMs - this.retention.maxAgeMs,
        });
      }
      removed += await this.trimSource(sourceId, budget);
      await budget.spend();
    }
    return removed;
  }

  /**
   * Trims each channel of a source to its newest `keepPerChannel` events, oldest first; the count
   * removed. Only channels whose count is over the limit are visited, from `event_counts`.
   */
  private async trimSource(sourceId: string, budget = new TurnBudget()): Promise<number> {
    const keep = this.retention.keepPerChannel;
    if (keep <= 0) return 0;
    const s = this.statements;
    let removed = 0;
    let page = s.firstOverfull.all(sourceId, keep);
    while (page.length > 0) {
      for (const { channel } of page) {
        for (;;) {
          this.requireOpen();
          const excess = (s.channelCount.get(sourceId, channel)?.total ?? 0) - keep;
          if (excess <= 0) break;
          const count = this.removeChunk(sourceId, this.deletes.oldestOfChannel, {
            channel,
            limit: Math.min(excess, this.chunkRows),
          });
          removed += count;
          // A count above the rows present (never written so, but never loop on it).
          if (count === 0) break;
          await nextTurn();
        }
        await budget.spend();
      }
      if (page.length < CHANNEL_PAGE) break;
      this.requireOpen();
      page = s.nextOverfull.all(sourceId, (page[page.length - 1] as { channel: string }).channel, keep);
    }
    return removed;
  }

  /** Runs a chunk delete until it removes less than a chunk, a turn of the event loop between chunks. */
  private async inChunks(sourceId: string, statement: ChunkDelete, params: Record<string, unknown>): Promise<number> {
    let removed = 0;
    for (;;) {
      this.requireOpen();
      const count = this.removeChunk(sourceId, statement, params);
      removed += count;
      if (count < this.chunkRows) return removed;
      await nextTurn();
    }
  }

  /** A deletion still going when the file is closed (the server stops) ends with this error. */
  private requireOpen(): void {
    if (!this.db.open) throw new Error("the event store was closed before the deletion finished");
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
