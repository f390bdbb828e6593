/**
 * Local mode's outbox: what makes routing survive a hard kill (docs/durability.md).
 *
 * `SqliteEventStore`, given a {@link SqliteOutbox}, writes outbox rows in the appends' own
 * transaction: the events and the note that they still have to be routed are stored together or
 * not at all. A grouped write's consecutive appends of one source that share their ms share one
 * row (decision 492). The outbox relay (`functions/local-mode/drivers/outbox-relay.ts`) routes
 * each append and tells {@link SqliteOutbox.appendRouted}; a row goes once every append it covers
 * was routed (every delivery and run queued). Rows that remain are routed again from the events
 * read back.
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

/** A row this process wrote whose appends are not all routed yet. */
interface LiveRow {
  sourceId: string;
  ms: number;
  firstN: number;
  lastN: number;
  /** Appends of the row not routed yet. */
  unrouted: number;
  /** One of its appends failed to route: the row stays for a sweep, which routes it whole. */
  failed: boolean;
}

/**
 * Live rows kept at most, by default: past it (appends whose publish never reached the relay),
 * they are forgotten, and their rows stay in the table for the minute's sweep.
 */
const MAX_LIVE_ROWS = 100_000;

const liveKey = (sourceId: string, ms: number) => `${sourceId} ${ms}`;

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
  /** The live rows of each source and ms (usually one), by `liveKey`. */
  private readonly live = new Map<string, LiveRow[]>();
  private liveRows = 0;

  constructor(
    private readonly db: SqliteDatabase,
    private readonly options: { removeDelayMs?: number; maxLiveRows?: number } = {},
  ) {
    this.statements = prepare(db);
    this.removeAll = db.transaction((removals: [string, number, number][]) => {
      for (const [sourceId, ms, firstN] of removals) this.statements.remove.run(sourceId, ms, firstN);
    });
  }

  /**
   * Notes appends of `<ms>-<firstN>` to `<ms>-<lastN>` not routed yet. Call it inside the appends'
   * transaction, and {@link recorded} once it committed.
   */
  record(sourceId: string, ms: number, firstN: number, lastN: number, createdAt: number): void {
    this.statements.record.run(sourceId, ms, firstN, lastN, createdAt);
  }

  /**
   * The row `<ms>-<firstN>`..`<lastN>`, committed, covers `appends` appends, each of which the
   * relay will route and tell {@link appendRouted}: the row goes once all of them were routed.
   */
  recorded(sourceId: string, ms: number, firstN: number, lastN: number, appends: number): void {
    if (this.liveRows >= (this.options.maxLiveRows ?? MAX_LIVE_ROWS)) {
      this.live.clear();
      this.liveRows = 0;
    }
    const key = liveKey(sourceId, ms);
    const row: LiveRow = { sourceId, ms, firstN, lastN, unrouted: appends, failed: false };
    const rows = this.live.get(key);
    if (rows) rows.push(row);
    else this.live.set(key, [row]);
    this.liveRows++;
  }

  /** The first event's `n` of the live row holding the append that starts at `<ms>-<firstN>`, if any. */
  rowOf(sourceId: string, ms: number, firstN: number): number | undefined {
    return this.liveRowOf(sourceId, ms, firstN)?.firstN;
  }

  /**
   * The append that starts at `<ms>-<firstN>` was routed (`dispatched`) or failed to. Its row is
   * removed (grouped, as by {@link remove}) once every append it covers was routed; when one of
   * them failed, the row stays, and the relay's sweep routes it whole. An append whose row is not
   * live (forgotten past {@link MAX_LIVE_ROWS}) leaves it too: it may hold other appends.
   */
  appendRouted(sourceId: string, ms: number, firstN: number, dispatched: boolean): void {
    const row = this.liveRowOf(sourceId, ms, firstN);
    if (!row) return;
    if (!dispatched) row.failed = true;
    if (--row.unrouted > 0) return;
    this.forget(row);
    if (!row.failed) this.remove(row.sourceId, row.ms, row.firstN);
  }

  private liveRowOf(sourceId: string, ms: number, n: number): LiveRow | undefined {
    const rows = this.live.get(liveKey(sourceId, ms));
    if (!rows) return undefined;
    for (const row of rows) if (row.firstN <= n && n <= row.lastN) return row;
    return undefined;
  }

  private forget(row: LiveRow): void {
    const key = liveKey(row.sourceId, row.ms);
    const rows = this.live.get(key);
    const index = rows?.indexOf(row) ?? -1;
    if (!rows || index < 0) return;
    this.liveRows--;
    if (rows.length === 1) this.live.delete(key);
    else rows.splice(index, 1);
  }

  /**
   * The row whose first event is `<ms>-<firstN>` is routed: it goes with the next grouped write,
   * within `removeDelayMs` (default 10). A live row of that key is forgotten.
   */
  remove(sourceId: string, ms: number, firstN: number): void {
    const live = this.liveRowOf(sourceId, ms, firstN);
    if (live?.firstN === firstN) this.forget(live);
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
