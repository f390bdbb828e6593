import { describe, expect, it } from "vitest";
import { openSqlite, type SqliteDatabase } from "#adapters/local/sqlite-database";
import { SqliteDeliveryQueue } from "#adapters/local/sqlite-delivery-queue";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import { SqliteOutbox } from "#adapters/local/sqlite-outbox";
import type { NewEvent, SourceRecord, StoredEvent } from "#core/component-model";
import { type DispatchDeps, deliveryIdFor } from "#core/dispatcher";
import type { Logger } from "#core/ports/logger";
import type { RunJob } from "#core/ports/run-queue";
import type { SubscriptionStore } from "#core/ports/subscription-store";
import type { WorkflowStore } from "#core/ports/workflow-store";
import type { DeliveryRecord, SubscriptionRecord } from "#core/subscription-model";
import { OutboxRelay } from "#local-mode/drivers/outbox-relay";
import { recordingLogger } from "../../support/recording-logger.ts";
import { sourceRecord } from "../../support/source-record.ts";

const NOW = Date.UTC(2026, 10, 20, 12);
const OWNER = { userId: "u_ada", workspaceId: "o_ada" };
const SOURCE = "dc_one";

const newEvent = (event: NewEvent["event"], channel = ""): NewEvent => ({
  channel,
  event,
  emitId: `emit-${JSON.stringify(event)}`,
  meta: {},
});

const outboxRows = (db: SqliteDatabase) =>
  db
    .prepare("SELECT source_id, ms, first_n, last_n, created_at FROM event_outbox ORDER BY source_id, ms, first_n")
    .all();

describe("SqliteEventStore with an outbox", () => {
  it("writes one outbox row per append, naming its first and last event, in the append's transaction", async () => {
    const db = openSqlite(":memory:");
    const store = new SqliteEventStore(db, { outbox: new SqliteOutbox(db) });
    await store.appendEvents(SOURCE, [newEvent(1), newEvent(2), newEvent("log", "$logs")], NOW);
    await store.appendEvents(SOURCE, [newEvent(4)], NOW);
    expect(outboxRows(db)).toEqual([
      { source_id: SOURCE, ms: NOW, first_n: 0, last_n: 2, created_at: NOW },
      { source_id: SOURCE, ms: NOW, first_n: 3, last_n: 3, created_at: NOW },
    ]);
    expect(store.eventsOfAppend(SOURCE, NOW, 0, 2).map((event) => [event.id, event.event])).toEqual([
      [`${NOW}-0`, 1],
      [`${NOW}-1`, 2],
      [`${NOW}-2`, "log"],
    ]);

    // An outbox row that cannot be written fails the append: no event is stored without its row.
    const failing = new SqliteEventStore(db, {
      outbox: {
        record: () => {
          throw new Error("disk full");
        },
      },
    });
    await expect(failing.appendEvents("dc_two", [newEvent(5)], NOW)).rejects.toThrow("disk full");
    expect((await store.listEvents("dc_two", { limit: 10 })).items).toEqual([]);
    expect(store.eventsOfAppend("dc_two", NOW, 0, 0)).toEqual([]);
  });

  it("removes rows in one grouped write a little later, or at once on flush", async () => {
    const db = openSqlite(":memory:");
    const outbox = new SqliteOutbox(db, { removeDelayMs: 5 });
    outbox.record(SOURCE, NOW, 0, 1, NOW);
    outbox.record(SOURCE, NOW, 2, 2, NOW);
    outbox.record("dc_two", NOW, 0, 0, NOW);
    outbox.remove(SOURCE, NOW, 0);
    outbox.remove("dc_two", NOW, 0);
    expect(outbox.size()).toBe(3);
    await expect.poll(() => outbox.size()).toBe(1);
    expect(outbox.list(Number.POSITIVE_INFINITY, 10)).toEqual([
      { sourceId: SOURCE, ms: NOW, firstN: 2, lastN: 2, createdAt: NOW },
    ]);
    outbox.remove(SOURCE, NOW, 2);
    outbox.flush();
    expect(outbox.size()).toBe(0);
  });
  it("keeps removals the data dir refused, without throwing, and writes them once it takes writes again", async () => {
    const db = openSqlite(":memory:");
    const outbox = new SqliteOutbox(db, { removeDelayMs: 1 });
    outbox.record(SOURCE, NOW, 0, 0, NOW);
    outbox.record(SOURCE, NOW, 1, 1, NOW);
    // A read-only data dir: every write fails with SQLITE_READONLY.
    db.pragma("query_only = ON");
    outbox.remove(SOURCE, NOW, 0);
    outbox.remove(SOURCE, NOW, 1);
    // What the grouped write's timer calls: a throw there would end the process.
    expect(() => outbox.flush()).not.toThrow();
    expect(outbox.size()).toBe(2);
    db.pragma("query_only = OFF");
    await expect.poll(() => outbox.size(), { timeout: 5_000 }).toBe(0);
  });
});

/** A local fan-out on one SQLite file: events with an outbox, the real delivery queue, one webhook subscribed. */
function fanout(options: { listeners?: SubscriptionRecord[]; pageSize?: number } = {}) {
  const db = openSqlite(":memory:");
  const outbox = new SqliteOutbox(db);
  const events = new SqliteEventStore(db, { outbox });
  const deliveries = new SqliteDeliveryQueue(db);
  const enqueued: DeliveryRecord[][] = [];
  const runs: RunJob[] = [];
  const errors: Record<string, unknown>[] = [];
  const sourceReads: string[] = [];
  let failNext = 0;
  const subscription = (listenerId: string, listenerKind: SubscriptionRecord["listenerKind"]): SubscriptionRecord => ({
    id: `sub_${listenerId}`,
    ...OWNER,
    emitterId: SOURCE,
    emitterKind: "source",
    emitterKey: SOURCE,
    listenerId,
    listenerKind,
    eventName: "",
    createdAt: NOW,
  });
  const listeners = options.listeners ?? [subscription("wh_a", "webhook"), subscription("dc_listener", "source")];
  const deps: DispatchDeps & { log: Logger } = {
    sources: {
      getSource: async (id: string): Promise<SourceRecord | undefined> => {
        sourceReads.push(id);
        return sourceRecord({ user: { id: OWNER.userId }, workspace: { id: OWNER.workspaceId } }, id, NOW);
      },
    } as DispatchDeps["sources"],
    workflows: { getWorkflow: async () => undefined } as Partial<WorkflowStore> as WorkflowStore,
    subscriptions: {
      findSubscriptions: async (keys: readonly string[], eventName: string) =>
        listeners.filter((s) => keys.includes(s.emitterKey) && s.eventName === eventName),
    } as Partial<SubscriptionStore> as SubscriptionStore,
    deliveries: {
      enqueue: async (batch) => {
        if (failNext > 0) {
          failNext--;
          throw new Error("disk full");
        }
        enqueued.push([...batch]);
        await deliveries.enqueue(batch);
      },
    },
    runs: { enqueue: async (job) => void runs.push(job) },
    clock: { nowMs: () => NOW + 5 },
    log: recordingLogger(errors),
  };
  const relay = new OutboxRelay({ outbox, events, deps, ...(options.pageSize ? { pageSize: options.pageSize } : {}) });
  /** An append and its publish, as `storeAndPublish` does them. */
  const emit = async (...values: NewEvent["event"][]) => {
    const stored = await events.appendEvents(
      SOURCE,
      values.map((value) => newEvent(value)),
      NOW,
    );
    relay.listener(stored, OWNER);
    return stored;
  };
  return {
    db,
    outbox,
    events,
    deliveries,
    relay,
    enqueued,
    runs,
    errors,
    sourceReads,
    emit,
    subscription,
    failNextDispatch: () => void failNext++,
  };
}

describe("OutboxRelay", () => {
  it("routes a publish and then removes its outbox row", async () => {
    const { relay, emit, outbox, enqueued, runs, deliveries } = fanout();
    const stored = await emit({ n: 1 }, { n: 2 });
    expect(outbox.size()).toBe(1);
    await relay.drain();
    outbox.flush();
    expect(outbox.size()).toBe(0);
    expect(enqueued.flat().map((delivery) => delivery.id)).toEqual(
      stored.map((event) => deliveryIdFor("wh_a", SOURCE, event.id)),
    );
    expect(deliveries.size()).toBe(2);
    expect(runs.map((run) => run.event)).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it("keeps the row of a failed dispatch, and a redispatch routes it from the events read back", async () => {
    const { relay, emit, outbox, enqueued, errors, failNextDispatch, sourceReads } = fanout();
    failNextDispatch();
    const stored = await emit({ n: 1 }, { n: 2 });
    await relay.drain();
    outbox.flush();
    expect(errors).toEqual([expect.objectContaining({ source_id: SOURCE, error: "Error: disk full" })]);
    expect(outbox.size()).toBe(1);

    // A sweep leaves rows newer than its cutoff alone.
    await expect(relay.redispatch(NOW)).resolves.toBe(0);
    expect(enqueued).toEqual([]);
    await expect(relay.redispatch(NOW + 1)).resolves.toBe(1);
    outbox.flush();
    expect(enqueued.flat().map((delivery) => [delivery.eventId, delivery.payload])).toEqual(
      stored.map((event) => [event.id, expect.objectContaining({ id: event.id, event: event.event })]),
    );
    // Without the publisher's owner, the dispatch read the source.
    expect(sourceReads).toEqual([SOURCE]);
    expect(outbox.size()).toBe(0);
  });

  it("leaves alone the rows this process is dispatching", async () => {
    const { relay, emit, outbox, enqueued } = fanout();
    // Two publishes of one source (appended in one grouped write): the second waits behind the
    // first in the per-source queue.
    await Promise.all([emit({ n: 1 }), emit({ n: 2 })]);
    await expect(relay.redispatch(Number.POSITIVE_INFINITY)).resolves.toBe(0);
    await relay.drain();
    outbox.flush();
    // Routed once each, together (one source's publishes of one turn are dispatched as one).
    expect(enqueued).toHaveLength(1);
    expect(enqueued.flat()).toHaveLength(2);
    expect(outbox.size()).toBe(0);
  });

  it("routes what a dead process left: again where it was routed already, without queueing a delivery twice", async () => {
    const { relay, outbox, events, enqueued, deliveries, runs } = fanout({ pageSize: 2 });
    // Appended (with their rows) by a process that died before or while routing them.
    const appended: StoredEvent[][] = [];
    for (let n = 0; n < 5; n++) appended.push(await events.appendEvents(SOURCE, [newEvent({ n })], NOW + n));
    // The first append had been routed, but its row not yet removed.
    await deliveries.enqueue([
      {
        id: deliveryIdFor("wh_a", SOURCE, appended[0]![0]!.id),
        target: { kind: "webhook", webhookId: "wh_a" },
        subscriptionIds: ["sub_wh_a"],
        emitterId: SOURCE,
        eventId: appended[0]![0]!.id,
        channel: "",
        payload: { first: true },
        attempts: 0,
        nextAttemptAt: NOW,
        createdAt: NOW,
      },
    ]);
    expect(outbox.size()).toBe(5);

    await expect(relay.redispatch(Number.POSITIVE_INFINITY)).resolves.toBe(5);
    outbox.flush();
    expect(outbox.size()).toBe(0);
    // In append order, a page at a time (a page's rows of one source dispatched as one).
    const ids = appended.map((batch) => batch[0]!.id);
    expect(enqueued.map((batch) => batch.map((delivery) => delivery.eventId))).toEqual([
      ids.slice(0, 2),
      ids.slice(2, 4),
      ids.slice(4),
    ]);
    // The delivery already queued was kept as it was: one row per event.
    expect(deliveries.size()).toBe(5);
    expect(deliveries.get(deliveryIdFor("wh_a", SOURCE, appended[0]![0]!.id))?.payload).toEqual({ first: true });
    expect(runs).toHaveLength(5);
  });

  it("removes, without routing, a row whose events were deleted since", async () => {
    const { relay, outbox, events, enqueued } = fanout();
    await events.appendEvents(SOURCE, [newEvent(1), newEvent(2)], NOW);
    await events.deleteEvents(SOURCE, {});
    await expect(relay.redispatch(Number.POSITIVE_INFINITY)).resolves.toBe(0);
    outbox.flush();
    expect(outbox.size()).toBe(0);
    expect(enqueued).toEqual([]);
  });

  it("routes what remains of a row whose first events were deleted, and removes the row", async () => {
    const { relay, outbox, events, enqueued } = fanout();
    const stored = await events.appendEvents(SOURCE, [newEvent(1), newEvent(2), newEvent(3)], NOW);
    await events.deleteEvents(SOURCE, { toId: stored[0]!.id });
    await expect(relay.redispatch(Number.POSITIVE_INFINITY)).resolves.toBe(1);
    outbox.flush();
    expect(enqueued.flat().map((delivery) => delivery.eventId)).toEqual([stored[1]!.id, stored[2]!.id]);
    expect(outbox.size()).toBe(0);
  });
});

describe("OutboxRelay redispatch of a long outbox", () => {
  it("routes a page per turn of the event loop, so the server's other work runs in between", async () => {
    const { relay, outbox, events, runs } = fanout({ pageSize: 5 });
    for (let n = 0; n < 40; n++) await events.appendEvents(SOURCE, [newEvent({ n })], NOW + n);
    let finished = false;
    const redispatch = relay.redispatch(Number.POSITIVE_INFINITY).then((count) => {
      finished = true;
      return count;
    });
    const turnsSeen: number[] = [];
    while (!finished) {
      await new Promise((resolve) => setImmediate(resolve));
      turnsSeen.push(runs.length);
    }
    await expect(redispatch).resolves.toBe(40);
    // Other turns ran while it went on, and saw it part way.
    expect(turnsSeen.some((routed) => routed > 0 && routed < 40)).toBe(true);
    outbox.flush();
    expect(outbox.size()).toBe(0);
  });
});
