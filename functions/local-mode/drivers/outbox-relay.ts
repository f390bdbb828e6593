/**
 * Local mode's fan-out driver, as the event dispatcher function is on AWS
 * (`functions/internal/event-dispatcher.ts`): it listens to the in-process bus, routes each
 * publish with `dispatchEvents` of `#core/dispatcher`, one source's publishes one after the other,
 * and removes the publish's outbox row (`SqliteOutbox`) once its deliveries and runs are queued.
 * Rows that remain (the process died before routing ended, or a dispatch failed) are routed again
 * from the events read back: all of them at start, before the server takes requests, and every
 * minute those older than a minute that this process is not dispatching (docs/durability.md).
 *
 * A dispatch made again is harmless for webhooks: delivery ids are derived from (webhook, source,
 * event) and the delivery queue keeps the delivery it already holds; a delivery that was already
 * made is made again under the same id. A listening source may run a second time; a listening
 * workflow does not (its run id is derived from the event, `eventRunId`).
 */
import { nextTurn } from "#adapters/local/event-loop";
import type { OutboxEntry, SqliteOutbox } from "#adapters/local/sqlite-outbox";
import type { StoredEvent } from "#core/component-model";
import { type DispatchDeps, dispatchEvents } from "#core/dispatcher";
import { parseEventId } from "#core/event-ids";
import type { Deps } from "#core/ports/deps";
import type { EmitterOwner } from "#core/ports/event-bus";

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

/** Dispatches publishes in the background, and a way to wait for what it started. */
export interface SerialDispatcher {
  /**
   * Dispatches one publish after that source's earlier ones; never blocks, never throws. `settled`
   * is called once the dispatch settled: `dispatched` is true when every delivery and run was
   * queued, false when the dispatch failed (and was logged). A throw of `settled` is logged.
   */
  listener(events: readonly StoredEvent[], owner?: EmitterOwner, settled?: (dispatched: boolean) => void): void;
  /** Resolves when every dispatch started so far has settled. */
  drain(): Promise<void>;
}

/** Calls `settled`; a throw is logged, lest it break the chain of that source's later dispatches. */
function report(
  deps: Pick<Deps, "log">,
  sourceId: string,
  settled: ((dispatched: boolean) => void) | undefined,
  dispatched: boolean,
): void {
  try {
    settled?.(dispatched);
  } catch (error) {
    deps.log.error("a dispatch's settle callback failed", { source_id: sourceId, error: String(error) });
  }
}

/** A publish waiting for its source's dispatch. */
interface Publish {
  events: readonly StoredEvent[];
  owner: EmitterOwner | undefined;
  settled: ((dispatched: boolean) => void) | undefined;
}

/** Events one grouped dispatch takes, at most (a group always takes at least one publish). */
const GROUP_EVENTS_MAX = 1_000;

/** The next publishes of `waiting` (removed from it) to dispatch as one: at most about {@link GROUP_EVENTS_MAX} events. */
function takeGroup(waiting: Publish[]): Publish[] {
  let count = 0;
  let taken = 0;
  while (
    taken < waiting.length &&
    (taken === 0 || count + (waiting[taken] as Publish).events.length <= GROUP_EVENTS_MAX)
  ) {
    count += (waiting[taken] as Publish).events.length;
    taken++;
  }
  return waiting.splice(0, taken);
}

/**
 * Local mode's dispatcher: dispatches each publish in the background, one source's publishes one
 * after the other, so that source's deliveries are queued in emit order. The publishes of a source
 * that arrive while its previous dispatch runs (or in the same turn) are dispatched as one, in
 * order: one delivery enqueue (one transaction) for all their events instead of one per publish.
 * A grouped dispatch that fails is made again publish by publish, so a failure is reported only for
 * the publish that fails alone (its deliveries partly queued are queued again under the same ids,
 * which the queue ignores). A failed dispatch is logged and reported to `settled`; the outbox
 * (`OutboxRelay`) keeps its events and dispatches them again later.
 */
export function serialDispatcher(deps: DispatchDeps & Pick<Deps, "log">): SerialDispatcher {
  /** Per source with a dispatch running: the publishes waiting for it, and the end of that source's dispatches. */
  const lanes = new Map<string, { waiting: Publish[]; done: Promise<void> }>();

  const dispatchOne = async (sourceId: string, publish: Publish) => {
    try {
      await dispatchEvents(deps, publish.events, publish.owner);
      report(deps, sourceId, publish.settled, true);
    } catch (error) {
      deps.log.error("events could not be dispatched to their subscribers", {
        source_id: sourceId,
        event_ids: publish.events.map((event) => event.id),
        error: String(error),
      });
      report(deps, sourceId, publish.settled, false);
    }
  };

  const dispatchGroup = async (sourceId: string, group: readonly Publish[]) => {
    if (group.length === 1) return dispatchOne(sourceId, group[0] as Publish);
    try {
      // One source: the same owner for all (a publish read back from the outbox comes without it).
      const owner = group.find((publish) => publish.owner !== undefined)?.owner;
      await dispatchEvents(
        deps,
        group.flatMap((publish) => publish.events),
        owner,
      );
    } catch {
      for (const publish of group) await dispatchOne(sourceId, publish);
      return;
    }
    for (const publish of group) report(deps, sourceId, publish.settled, true);
  };

  const drainLane = async (sourceId: string, lane: { waiting: Publish[] }) => {
    // A turn's publishes of this source (an append group's) join the first one's dispatch.
    await Promise.resolve();
    while (lane.waiting.length > 0) await dispatchGroup(sourceId, takeGroup(lane.waiting));
    lanes.delete(sourceId);
  };

  return {
    listener(events, owner, settled) {
      const sourceId = events[0]?.sourceId;
      if (sourceId === undefined) return;
      const lane = lanes.get(sourceId);
      if (lane) {
        lane.waiting.push({ events, owner, settled });
        return;
      }
      const started = { waiting: [{ events, owner, settled }], done: Promise.resolve() };
      lanes.set(sourceId, started);
      started.done = drainLane(sourceId, started);
    },
    async drain() {
      while (lanes.size > 0) await Promise.all([...lanes.values()].map((lane) => lane.done));
    },
  };
}
