import { describe, expect, it } from "vitest";
import type { SourceRecord, StoredEvent } from "#core/component-model";
import { type DispatchDeps, deliveryIdFor, dispatchEvents, emitterKeys } from "#core/dispatcher";
import { sseEnvelope } from "#core/event-views";
import { isId } from "#core/ids";
import type { RunJob } from "#core/ports/run-queue";
import type { SubscriptionStore } from "#core/ports/subscription-store";
import {
  type DeliveryRecord,
  destinationOf,
  type ListenerKind,
  type SubscriptionRecord,
} from "#core/subscription-model";
import { serialDispatcher } from "#local-mode/drivers/outbox-relay";
import { recordingLogger } from "../../support/recording-logger.ts";
import { sourceRecord } from "../../support/source-record.ts";

const NOW = Date.UTC(2026, 10, 20, 12);
const ADA = { userId: "u_ada", workspaceId: "o_ada" };
const SOURCE = "dc_one";

const source = (id: string): SourceRecord =>
  sourceRecord({ user: { id: ADA.userId }, workspace: { id: ADA.workspaceId } }, id, NOW);

let eventCounter = 0;
function stored(channel: string, event: unknown, sourceId = SOURCE): StoredEvent {
  eventCounter++;
  return {
    sourceId,
    id: `${NOW}-${eventCounter}`,
    indexedAtMs: NOW,
    channel,
    event: event as StoredEvent["event"],
    emitId: `emit-${eventCounter}`,
    meta: { id: `user-id-${eventCounter}`, summary: `summary ${eventCounter}` },
  };
}

let subscriptionCounter = 0;
function subscription(
  emitterKey: string,
  listenerId: string,
  listenerKind: ListenerKind,
  eventName = "",
): SubscriptionRecord {
  subscriptionCounter++;
  return {
    id: `sub_${String(subscriptionCounter).padStart(4, "0")}`,
    userId: ADA.userId,
    workspaceId: ADA.workspaceId,
    emitterId: emitterKey.split(":")[0] ?? emitterKey,
    emitterKind: emitterKey.startsWith("dc_*") ? "sources-glob" : emitterKey.startsWith("o_") ? "workspace" : "source",
    emitterKey,
    listenerId,
    listenerKind,
    eventName,
    createdAt: NOW,
  };
}

/** The subscription store's matching rule over a list, recording every lookup. */
function fakeSubscriptions(all: SubscriptionRecord[]) {
  const lookups: { keys: readonly string[]; eventName: string }[] = [];
  const store = {
    async findSubscriptions(keys: readonly string[], eventName: string) {
      lookups.push({ keys, eventName });
      return all.filter((s) => keys.includes(s.emitterKey) && s.eventName === eventName);
    },
  } as Partial<SubscriptionStore> as SubscriptionStore;
  return { store, lookups };
}

function harness(subscriptions: SubscriptionRecord[], sources: SourceRecord[] = [source(SOURCE)]) {
  const enqueued: DeliveryRecord[][] = [];
  const runs: RunJob[] = [];
  const { store, lookups } = fakeSubscriptions(subscriptions);
  const sourceReads: string[] = [];
  const deps: DispatchDeps = {
    sources: {
      getSource: async (id: string) => {
        sourceReads.push(id);
        return sources.find((s) => s.id === id);
      },
    } as DispatchDeps["sources"],
    subscriptions: store,
    deliveries: {
      enqueue: async (batch) => {
        enqueued.push([...batch]);
      },
    },
    runs: {
      enqueue: async (job) => {
        runs.push(job);
      },
    },
    clock: { nowMs: () => NOW + 5 },
  };
  return { deps, enqueued, runs, lookups, sourceReads };
}

describe("deliveryIdFor", () => {
  it("is the same for the same webhook, source and event, and shaped like a delivery id of the event's time", () => {
    const id = deliveryIdFor("wh_a", "dc_one", `${NOW}-3`);
    expect(deliveryIdFor("wh_a", "dc_one", `${NOW}-3`)).toBe(id);
    expect(isId("delivery", id)).toBe(true);
    const others = [
      deliveryIdFor("wh_b", "dc_one", `${NOW}-3`),
      deliveryIdFor("wh_a", "dc_two", `${NOW}-3`),
      deliveryIdFor("wh_a", "dc_one", `${NOW}-4`),
    ];
    expect(new Set([id, ...others]).size).toBe(4);
    // Sorted by the event's time, like ids made by the generator.
    expect(deliveryIdFor("wh_a", "dc_one", `${NOW + 1}-0`) > id).toBe(true);
    expect(id.slice(0, 14)).toBe(deliveryIdFor("wh_z", "dc_other", `${NOW}-9`).slice(0, 14));
  });
});

describe("emitterKeys", () => {
  it("adds the workspace only for $errors", () => {
    expect(emitterKeys(SOURCE, ADA, "")).toEqual([SOURCE, "dc_*:u_ada"]);
    expect(emitterKeys(SOURCE, ADA, "$errors")).toEqual([SOURCE, "dc_*:u_ada", "o_ada"]);
    expect(emitterKeys(SOURCE, undefined, "$errors")).toEqual([SOURCE]);
  });
});

describe("dispatchEvents", () => {
  it("queues nothing and makes one lookup per channel when nobody listens", async () => {
    const { deps, enqueued, runs, lookups } = harness([]);
    const result = await dispatchEvents(deps, [stored("", { a: 1 }), stored("", { a: 2 }), stored("$logs", "x")]);
    expect(result).toEqual({ deliveries: 0, runs: 0, workflowsSkipped: 0 });
    expect(enqueued).toEqual([]);
    expect(runs).toEqual([]);
    expect(lookups).toEqual([
      { keys: [SOURCE, "dc_*:u_ada"], eventName: "" },
      { keys: [SOURCE, "dc_*:u_ada"], eventName: "$logs" },
    ]);
  });

  it("makes one delivery per event to a subscribed webhook, with the stream's envelope as payload", async () => {
    const sub = subscription(SOURCE, "wh_a", "webhook");
    const { deps, enqueued } = harness([sub]);
    const events = [stored("", { n: 1 }), stored("", { n: 2 })];
    const result = await dispatchEvents(deps, events);
    expect(result.deliveries).toBe(2);
    expect(enqueued).toHaveLength(1);
    expect(enqueued[0]).toEqual([
      {
        id: deliveryIdFor("wh_a", SOURCE, events[0]?.id as string),
        target: { kind: "webhook", webhookId: "wh_a" },
        subscriptionIds: [sub.id],
        emitterId: SOURCE,
        eventId: events[0]?.id,
        channel: "",
        payload: sseEnvelope(events[0] as StoredEvent),
        attempts: 0,
        nextAttemptAt: NOW + 5,
        createdAt: NOW + 5,
        // No delivery led to the event: this one is the first hop.
        hops: 1,
      },
      expect.objectContaining({
        id: deliveryIdFor("wh_a", SOURCE, events[1]?.id as string),
        eventId: events[1]?.id,
        payload: sseEnvelope(events[1] as StoredEvent),
      }),
    ]);
  });

  it("makes the same delivery ids when the same events are dispatched again", async () => {
    const { deps, enqueued } = harness([
      subscription(SOURCE, "wh_a", "webhook"),
      subscription(SOURCE, "wh_b", "webhook"),
    ]);
    const events = [stored("", 1), stored("", 2)];
    await dispatchEvents(deps, events);
    await dispatchEvents(deps, events);
    const [first, again] = enqueued.map((batch) => batch.map((delivery) => delivery.id));
    expect(again).toEqual(first);
    expect(new Set(first).size).toBe(4);
  });

  it("delivers an event once to a webhook that several subscriptions match, naming them oldest first", async () => {
    const exact = subscription(SOURCE, "wh_a", "webhook");
    const glob = subscription("dc_*:u_ada", "wh_a", "webhook");
    const { deps, enqueued } = harness([glob, exact]);
    await dispatchEvents(deps, [stored("", { n: 1 })]);
    expect(enqueued.flat()).toHaveLength(1);
    expect(enqueued[0]?.[0]?.subscriptionIds).toEqual([exact.id, glob.id]);
  });

  it("queues every webhook's deliveries in one call, in event order", async () => {
    const { deps, enqueued } = harness([
      subscription("dc_*:u_ada", "wh_b", "webhook"),
      subscription(SOURCE, "wh_a", "webhook"),
    ]);
    const events = [stored("", 1), stored("", 2), stored("", 3)];
    await dispatchEvents(deps, events);
    expect(enqueued).toHaveLength(1);
    expect(enqueued[0]?.map((d) => [d.eventId, destinationOf(d)])).toEqual(
      events.flatMap((e) => [
        [e.id, "wh_a"],
        [e.id, "wh_b"],
      ]),
    );
  });

  it("routes by channel: a subscription gets only its own channel, the workspace only $errors", async () => {
    const { deps, enqueued } = harness([
      subscription(SOURCE, "wh_default", "webhook", ""),
      subscription(SOURCE, "wh_custom", "webhook", "orders"),
      subscription("o_ada", "wh_errors", "webhook", "$errors"),
      subscription("o_ada", "wh_wrong", "webhook", "orders"),
    ]);
    const events = [stored("", "d"), stored("orders", "o"), stored("$errors", "e"), stored("$logs", "l")];
    await dispatchEvents(deps, events);
    expect(enqueued[0]?.map((d) => [d.channel, destinationOf(d)])).toEqual([
      ["", "wh_default"],
      ["orders", "wh_custom"],
      ["$errors", "wh_errors"],
    ]);
  });

  it("does not match another user's dc_* glob", async () => {
    const { deps, enqueued } = harness([subscription("dc_*:u_bob", "wh_bob", "webhook")]);
    const result = await dispatchEvents(deps, [stored("", 1)]);
    expect(result.deliveries).toBe(0);
    expect(enqueued).toEqual([]);
  });

  it("runs a listening source with each emitted event, in order, including itself on a custom channel", async () => {
    const { deps, runs, enqueued } = harness(
      [subscription(SOURCE, "dc_two", "source"), subscription(SOURCE, SOURCE, "source", "self")],
      [source(SOURCE), source("dc_two")],
    );
    await dispatchEvents(deps, [stored("", { n: 1 }), stored("self", { later: true }), stored("", { n: 2 })]);
    expect(runs).toEqual([
      { sourceId: "dc_two", trigger: "event", event: { n: 1 } },
      { sourceId: SOURCE, trigger: "event", event: { later: true } },
      { sourceId: "dc_two", trigger: "event", event: { n: 2 } },
    ]);
    expect(enqueued).toEqual([]);
  });

  it("does not deliver a source's own $logs and $errors back to it, but does to other sources", async () => {
    const { deps, runs } = harness(
      [
        subscription(SOURCE, SOURCE, "source", "$logs"),
        subscription(SOURCE, SOURCE, "source", "$errors"),
        subscription(SOURCE, "dc_two", "source", "$logs"),
      ],
      [source(SOURCE), source("dc_two")],
    );
    const result = await dispatchEvents(deps, [stored("$logs", "a log line"), stored("$errors", { error: "x" })]);
    expect(runs).toEqual([{ sourceId: "dc_two", trigger: "event", event: "a log line" }]);
    expect(result.runs).toBe(1);
  });

  it("counts workflow listeners without delivering to them", async () => {
    const { deps, runs, enqueued } = harness([subscription(SOURCE, "p_flow", "workflow")]);
    const result = await dispatchEvents(deps, [stored("", 1), stored("", 2)]);
    expect(result).toEqual({ deliveries: 0, runs: 0, workflowsSkipped: 2 });
    expect(runs).toEqual([]);
    expect(enqueued).toEqual([]);
  });

  it("finds subscriptions by the owner the publisher gave, without reading the source", async () => {
    const { deps, enqueued, sourceReads } = harness(
      [subscription("dc_*:u_ada", "wh_glob", "webhook"), subscription("o_ada", "wh_errors", "webhook", "$errors")],
      [],
    );
    const result = await dispatchEvents(deps, [stored("", 1), stored("$errors", { error: "x" })], ADA);
    expect(result.deliveries).toBe(2);
    expect(enqueued.flat().map((d) => destinationOf(d))).toEqual(["wh_glob", "wh_errors"]);
    expect(sourceReads).toEqual([]);
  });

  it("without an owner, reads the source once, and still tries the exact id of one deleted since it emitted", async () => {
    const { deps, enqueued, lookups, sourceReads } = harness([subscription("dc_gone", "wh_a", "webhook")], []);
    await dispatchEvents(deps, [stored("", 1, "dc_gone"), stored("", 2, "dc_gone")]);
    expect(sourceReads).toEqual(["dc_gone"]);
    expect(lookups[0]?.keys).toEqual(["dc_gone"]);
    expect(enqueued.flat()).toHaveLength(2);
  });

  it("does nothing for an empty batch", async () => {
    const { deps, lookups } = harness([]);
    expect(await dispatchEvents(deps, [])).toEqual({ deliveries: 0, runs: 0, workflowsSkipped: 0 });
    expect(lookups).toEqual([]);
  });
});

// Local mode's driver (functions/local-mode/drivers/outbox-relay.ts), tested here on the harness above.
describe("serialDispatcher", () => {
  function recordingLog() {
    const errors: Record<string, unknown>[] = [];
    return { log: recordingLogger(errors), errors };
  }

  it("queues one source's publishes in publish order even when the first lookup is slower", async () => {
    const { deps, enqueued, sourceReads } = harness([subscription("dc_*:u_ada", "wh_a", "webhook")]);
    const original = deps.subscriptions.findSubscriptions.bind(deps.subscriptions);
    let calls = 0;
    deps.subscriptions.findSubscriptions = async (keys, eventName) => {
      if (++calls === 1) await new Promise((resolve) => setTimeout(resolve, 20));
      return original(keys, eventName);
    };
    const { log } = recordingLog();
    const dispatcher = serialDispatcher({ ...deps, log });
    const first = stored("", 1);
    const second = stored("", 2);
    dispatcher.listener([first], ADA);
    dispatcher.listener([second], ADA);
    await dispatcher.drain();
    expect(enqueued.flat().map((delivery) => delivery.eventId)).toEqual([first.id, second.id]);
    // The owner given with each publish reached the dispatch.
    expect(sourceReads).toEqual([]);
  });

  it("reports each dispatch to its settled callback once it settled, whether it was queued, and survives a callback that throws", async () => {
    const { deps } = harness([subscription(SOURCE, "wh_a", "webhook")]);
    const enqueue = deps.deliveries.enqueue;
    deps.deliveries.enqueue = async (batch) => {
      if (batch.some((delivery) => delivery.eventId === failing.id)) throw new Error("disk full");
      return enqueue(batch);
    };
    const { log, errors } = recordingLog();
    const settled: [string, boolean][] = [];
    const dispatcher = serialDispatcher({ ...deps, log });
    const ok = stored("", 1);
    const failing = stored("", 2);
    const later = stored("", 3);
    for (const event of [ok, failing, later]) {
      dispatcher.listener([event], ADA, (dispatched) => {
        settled.push([event.id, dispatched]);
        if (settled.length === 1) throw new Error("callback bug");
      });
    }
    await dispatcher.drain();
    expect(settled).toEqual([
      [ok.id, true],
      [failing.id, false],
      [later.id, true],
    ]);
    expect(errors.map((fields) => fields.error)).toEqual(["Error: callback bug", "Error: disk full"]);
  });

  it("logs a failed dispatch and goes on with the next one", async () => {
    const { deps, enqueued } = harness([subscription(SOURCE, "wh_a", "webhook")]);
    const enqueue = deps.deliveries.enqueue;
    deps.deliveries.enqueue = async (batch) => {
      if (batch.some((delivery) => delivery.eventId === lost.id)) throw new Error("disk full");
      return enqueue(batch);
    };
    const { log, errors } = recordingLog();
    const dispatcher = serialDispatcher({ ...deps, log });
    const lost = stored("", 1);
    const kept = stored("", 2);
    expect(() => dispatcher.listener([lost])).not.toThrow();
    dispatcher.listener([kept]);
    await dispatcher.drain();
    expect(errors).toEqual([
      expect.objectContaining({ source_id: SOURCE, event_ids: [lost.id], error: "Error: disk full" }),
    ]);
    expect(enqueued.flat().map((delivery) => delivery.eventId)).toEqual([kept.id]);
  });

  it("dispatches the publishes of a source made in one turn, or during its dispatch, as one: one delivery enqueue, in order", async () => {
    const { deps, enqueued } = harness([subscription(SOURCE, "wh_a", "webhook")]);
    let release: () => void = () => {};
    const lookup = deps.subscriptions.findSubscriptions.bind(deps.subscriptions);
    let calls = 0;
    deps.subscriptions.findSubscriptions = async (keys, eventName) => {
      // The second dispatch's lookup waits, while publishes keep coming.
      if (++calls === 2) await new Promise<void>((resolve) => (release = resolve));
      return lookup(keys, eventName);
    };
    const { log } = recordingLog();
    const dispatcher = serialDispatcher({ ...deps, log });
    const settled: string[] = [];
    const publish = (events: StoredEvent[]) =>
      dispatcher.listener(events, ADA, (dispatched) => settled.push(`${events[0]?.id} ${dispatched}`));
    const turn = [stored("", 1), stored("", 2), stored("", 3)];
    for (const event of turn) publish([event]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(enqueued.map((batch) => batch.map((delivery) => delivery.eventId))).toEqual([turn.map((event) => event.id)]);

    const during = [stored("", 4), stored("", 5)];
    const waiting = stored("", 6);
    publish([waiting]);
    await new Promise((resolve) => setImmediate(resolve));
    for (const event of during) publish([event]);
    release();
    await dispatcher.drain();
    expect(enqueued.map((batch) => batch.map((delivery) => delivery.eventId))).toEqual([
      turn.map((event) => event.id),
      [waiting.id],
      during.map((event) => event.id),
    ]);
    expect(settled).toEqual([...turn, waiting, ...during].map((event) => `${event.id} true`));
  });
});
