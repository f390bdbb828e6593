/**
 * Local mode's outbox: what makes routing survive a hard kill (docs/durability.md).
 *
 * `SqliteEventStore`, given a {@link SqliteOutbox}, writes one outbox row per append in the
 * append's own transaction: the events and the note that they still have to be routed are stored
 * together or not at all. The {@link OutboxRelay} is the bus listener that routes them
 * (`serialDispatcher` of `#core/dispatcher`) and removes the row once every delivery and run is
 * queued. Rows that remain (the process died before routing ended, or a dispatch failed) are
 * dispatched again from the events read back: all of them at start, before the server takes
 * requests, and every minute those older than a minute that this process is not dispatching.
 *
 * A dispatch made again is harmless for webhooks: delivery ids are derived from (webhook, source,
 * event) and the delivery queue keeps the delivery it already holds; a delivery that was already
 * made is made again under the same id. A listening source may run a second time.
 */
import type { StoredEvent } from "#core/component-model";
import { type DispatchDeps, type SerialDispatcher, serialDispatcher } from "#core/dispatcher";
import { parseEventId } from "#core/event-ids";
import type { Deps } from "#core/ports/deps";
import type { EmitterOwner } from "#core/ports/event-bus";
import { nextTurn } from "./event-loop.ts";
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

export interface OutboxRelayOptions {
  outbox: SqliteOutbox;
  /** Reads an outbox row's events back (`SqliteEventStore.eventsOfAppend`). */
  events: { eventsOfAppend(sourceId: string, ms: number, firstN: number, lastN: number): StoredEvent[] };
  deps: DispatchDeps & Pick<Deps, "log">;
  /** Rows read back per step of {@link OutboxRelay.redispatch}. @default 500 */
  pageSize?: number;
}

/** The outbox row of a publish: its source and the id of the append's first event. */
interface RowKey {
  sourceId: string;
  ms: number;
  firstN: number;
}

const keyText = (key: RowKey) => `${key.sourceId} ${key.ms} ${key.firstN}`;

/**
 * The bus listener of local mode's fan-out ({@link listener}): dispatches each publish with
 * `serialDispatcher` and removes its outbox row once it is routed; {@link redispatch} routes again
 * what the outbox still holds.
 */
export class OutboxRelay {
  private readonly dispatcher: SerialDispatcher;
  /** Rows being dispatched by this process, which a sweep leaves alone. */
  private readonly inFlight = new Set<string>();
  private readonly pageSize: number;

  constructor(private readonly options: OutboxRelayOptions) {
    this.pageSize = Math.max(1, options.pageSize ?? 500);
    this.dispatcher = serialDispatcher(options.deps);
  }

  /** For `InProcessEventBus.subscribeAll`: never blocks, never throws. */
  readonly listener = (events: readonly StoredEvent[], owner?: EmitterOwner): void => {
    const first = events[0];
    if (!first) return;
    const [ms, firstN] = parseEventId(first.id) ?? [0, 0];
    this.dispatch(events, owner, { sourceId: first.sourceId, ms, firstN });
  };

  /**
   * Dispatches again every outbox row of an append made before `createdBefore` that this process
   * is not dispatching now, reading its events back (a row whose events were all deleted since is
   * just removed). Rows go through the same per-source queue as live publishes; resolves when the
   * ones it started are routed (or failed, and stay for the next time). Returns how many it started.
   */
  async redispatch(createdBefore: number): Promise<number> {
    const { outbox, events, deps } = this.options;
    let started = 0;
    let after: OutboxEntry | undefined;
    // Rows of dispatches that settled are no longer in flight but may still wait for their grouped
    // removal: written first, so they are not dispatched a second time.
    outbox.flush();
    for (;;) {
      const page = outbox.list(createdBefore, this.pageSize, after);
      for (const entry of page) {
        if (this.inFlight.has(keyText(entry))) continue;
        const stored = events.eventsOfAppend(entry.sourceId, entry.ms, entry.firstN, entry.lastN);
        if (stored.length === 0) {
          outbox.remove(entry.sourceId, entry.ms, entry.firstN);
          continue;
        }
        // No owner: the dispatch reads the source. The row is the entry's: a row read back may have
        // lost its first events since.
        this.dispatch(stored, undefined, entry);
        started++;
      }
      if (page.length > 0) await this.dispatcher.drain();
      if (page.length < this.pageSize) break;
      after = page[page.length - 1];
      // A page per turn: the minute's sweep runs while the server serves everyone else.
      await nextTurn();
    }
    if (started > 0) deps.log.info("appended events routed again from the outbox", { appends: started });
    return started;
  }

  /** Resolves when every dispatch started so far has settled. */
  drain(): Promise<void> {
    return this.dispatcher.drain();
  }

  /** Dispatches the events of outbox row `row`, and removes the row once they are routed. */
  private dispatch(events: readonly StoredEvent[], owner: EmitterOwner | undefined, row: RowKey): void {
    const key = keyText(row);
    this.inFlight.add(key);
    this.dispatcher.listener(events, owner, (dispatched) => {
      this.inFlight.delete(key);
      // A failed dispatch keeps its row: the next sweep dispatches it again.
      if (dispatched) this.options.outbox.remove(row.sourceId, row.ms, row.firstN);
    });
  }
}
