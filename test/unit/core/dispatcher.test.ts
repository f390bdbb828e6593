import { describe, expect, it } from "vitest";
import type { SourceRecord, StoredEvent } from "#core/component-model";
import { type DispatchDeps, deliveryIdFor, dispatchEvents, emitterKeys, eventRunId } from "#core/dispatcher";
import { sseEnvelope } from "#core/event-views";
import { isId } from "#core/ids";
import type { RunJob, WorkflowRunJob } from "#core/ports/run-queue";
import type { SubscriptionStore } from "#core/ports/subscription-store";
import type { WorkflowStore } from "#core/ports/workflow-store";
import { runQueuedJob } from "#core/run-jobs";
import {
  type DeliveryRecord,
  destinationOf,
  type ListenerKind,
  type SubscriptionRecord,
} from "#core/subscription-model";
import { createWorkflow } from "#core/workflows";
import { serialDispatcher } from "#local-mode/drivers/outbox-relay";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";
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

function emitterKindOf(emitterKey: string): SubscriptionRecord["emitterKind"] {
  if (emitterKey.startsWith("dc_*")) return "sources-glob";
  if (emitterKey.startsWith("p_*")) return "workflows-glob";
  if (emitterKey.startsWith("o_")) return "workspace";
  return emitterKey.startsWith("p_") ? "workflow" : "source";
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
    emitterKind: emitterKindOf(emitterKey),
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

/** Workflows known to the harness's workflow store: their owner is Ada. */
const WORKFLOWS = ["p_flow", "p_other"];

function harness(subscriptions: SubscriptionRecord[], sources: SourceRecord[] = [source(SOURCE)]) {
  const enqueued: DeliveryRecord[][] = [];
  const runs: RunJob[] = [];
  const { store, lookups } = fakeSubscriptions(subscriptions);
  const sourceReads: string[] = [];
  const workflowReads: string[] = [];
  const deps: DispatchDeps = {
    sources: {
      getSource: async (id: string) => {
        sourceReads.push(id);
        return sources.find((s) => s.id === id);
      },
    } as DispatchDeps["sources"],
    workflows: {
      getWorkflow: async (id: string) => {
        workflowReads.push(id);
        return WORKFLOWS.includes(id) ? { id, ...ADA } : undefined;
      },
    } as Partial<WorkflowStore> as WorkflowStore,
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
  return { deps, enqueued, runs, lookups, sourceReads, workflowReads };
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

  it("picks the owner's glob of the emitter's kind: p_* for a workflow, dc_* for a source", () => {
    expect(emitterKeys("p_flow", ADA, "")).toEqual(["p_flow", "p_*:u_ada"]);
    expect(emitterKeys("p_flow", ADA, "$errors")).toEqual(["p_flow", "p_*:u_ada", "o_ada"]);
    expect(emitterKeys("p_flow", undefined, "")).toEqual(["p_flow"]);
  });
});

describe("eventRunId", () => {
  it("is the same for the same workflow, emitter and event, a run id timed by the event", () => {
    const id = eventRunId("p_flow", SOURCE, `${NOW}-3`);
    expect(eventRunId("p_flow", SOURCE, `${NOW}-3`)).toBe(id);
    expect(isId("run", id)).toBe(true);
    const others = [
      eventRunId("p_other", SOURCE, `${NOW}-3`),
      eventRunId("p_flow", "dc_two", `${NOW}-3`),
      eventRunId("p_flow", SOURCE, `${NOW}-4`),
    ];
    expect(new Set([id, ...others]).size).toBe(4);
    expect(eventRunId("p_flow", SOURCE, `${NOW + 1}-0`) > id).toBe(true);
    // Within one millisecond, in the events' order.
    const sameMs = [0, 1, 2, 9, 31, 32, 33, 1000, 1024, 5000].map((n) => eventRunId("p_flow", SOURCE, `${NOW}-${n}`));
    expect([...sameMs].sort()).toEqual(sameMs);
  });
});

describe("dispatchEvents", () => {
  it("queues nothing and makes one lookup per channel when nobody listens", async () => {
    const { deps, enqueued, runs, lookups } = harness([]);
    const result = await dispatchEvents(deps, [stored("", { a: 1 }), stored("", { a: 2 }), stored("$logs", "x")]);
    expect(result).toEqual({ deliveries: 0, runs: 0 });
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

  it("runs a listening workflow with each event, in order, under a run id made of (workflow, emitter, event)", async () => {
    const { deps, runs, enqueued } = harness([
      subscription(SOURCE, "p_flow", "workflow"),
      subscription("dc_*:u_ada", "p_flow", "workflow"),
      subscription(SOURCE, "wh_a", "webhook"),
    ]);
    const events = [stored("", { n: 1 }), stored("", { n: 2 })];
    events[1] = { ...(events[1] as StoredEvent), meta: { hops: 2 } };
    const result = await dispatchEvents(deps, events);
    expect(result).toEqual({ deliveries: 2, runs: 2 });
    expect(enqueued.flat().map((d) => destinationOf(d))).toEqual(["wh_a", "wh_a"]);
    const job = (event: StoredEvent): WorkflowRunJob => ({
      kind: "workflow",
      workflowId: "p_flow",
      runId: eventRunId("p_flow", SOURCE, event.id),
      trigger: "event",
      triggerId: SOURCE,
      event: event.event,
    });
    const [first, second] = events as [StoredEvent, StoredEvent];
    // An event run is no delivery: the run keeps the event's hop count.
    expect(runs).toEqual([job(first), { ...job(second), hops: 2 }]);
  });

  it("queues the same run ids when the same events are dispatched again", async () => {
    const { deps, runs } = harness([subscription(SOURCE, "p_flow", "workflow")]);
    const events = [stored("", 1), stored("", 2)];
    await dispatchEvents(deps, events);
    await dispatchEvents(deps, events);
    const ids = runs.map((job) => (job as WorkflowRunJob).runId);
    expect(ids.slice(2)).toEqual(ids.slice(0, 2));
    expect(new Set(ids).size).toBe(2);
  });

  it("routes a workflow's events to its id, the owner's p_* and, for $errors, the workspace; never dc_*", async () => {
    const { deps, enqueued, runs, lookups } = harness([
      subscription("p_flow", "wh_exact", "webhook"),
      subscription("p_*:u_ada", "wh_glob", "webhook"),
      subscription("p_*:u_bob", "wh_bob", "webhook"),
      subscription("dc_*:u_ada", "wh_sources", "webhook"),
      subscription("p_flow", "p_other", "workflow"),
      subscription("p_flow", "wh_errors", "webhook", "$errors"),
      subscription("p_*:u_ada", "wh_glob_errors", "webhook", "$errors"),
      subscription("o_ada", "wh_workspace_errors", "webhook", "$errors"),
    ]);
    const emit = stored("", { raw_event: { n: 1 } }, "p_flow");
    const error = stored("$errors", { error: { code: "Error" } }, "p_flow");
    await dispatchEvents(deps, [emit, error], ADA);
    expect(lookups.map((lookup) => lookup.keys)).toEqual([
      ["p_flow", "p_*:u_ada"],
      ["p_flow", "p_*:u_ada", "o_ada"],
    ]);
    expect(enqueued.flat().map((d) => [d.eventId, destinationOf(d)])).toEqual([
      [emit.id, "wh_exact"],
      [emit.id, "wh_glob"],
      [error.id, "wh_errors"],
      [error.id, "wh_glob_errors"],
      [error.id, "wh_workspace_errors"],
    ]);
    expect(enqueued.flat()[0]?.payload).toEqual(sseEnvelope(emit));
    expect(runs).toEqual([expect.objectContaining({ workflowId: "p_other", triggerId: "p_flow", event: emit.event })]);
  });

  it("does not deliver a workflow's own $errors back to it, but does to other workflows and sources", async () => {
    const { deps, runs } = harness(
      [
        subscription("p_flow", "p_flow", "workflow", "$errors"),
        subscription("p_*:u_ada", "p_flow", "workflow", "$errors"),
        subscription("o_ada", "p_flow", "workflow", "$errors"),
        subscription("p_*:u_ada", "p_other", "workflow", "$errors"),
        subscription("o_ada", "dc_two", "source", "$errors"),
      ],
      [source(SOURCE), source("dc_two")],
    );
    const error = stored("$errors", { error: { code: "Error" } }, "p_flow");
    const result = await dispatchEvents(deps, [error], ADA);
    expect(runs.map((job) => (job.kind === "workflow" ? job.workflowId : job.sourceId))).toEqual(["dc_two", "p_other"]);
    expect(result.runs).toBe(2);
  });

  it("lets a workflow listen to its own default channel: each hop a queued run", async () => {
    const { deps, runs } = harness([subscription("p_flow", "p_flow", "workflow")]);
    const emit = stored("", { raw_event: 1 }, "p_flow");
    await dispatchEvents(deps, [emit], ADA);
    expect(runs).toEqual([expect.objectContaining({ workflowId: "p_flow", triggerId: "p_flow" })]);
  });

  it("without an owner, reads a workflow emitter from the workflows, not the sources", async () => {
    const { deps, enqueued, lookups, sourceReads, workflowReads } = harness([
      subscription("p_*:u_ada", "wh_glob", "webhook"),
    ]);
    await dispatchEvents(deps, [stored("", 1, "p_flow"), stored("", 2, "p_flow")]);
    expect(workflowReads).toEqual(["p_flow"]);
    expect(sourceReads).toEqual([]);
    expect(lookups[0]?.keys).toEqual(["p_flow", "p_*:u_ada"]);
    expect(enqueued.flat()).toHaveLength(2);
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
    expect(await dispatchEvents(deps, [])).toEqual({ deliveries: 0, runs: 0 });
    expect(lookups).toEqual([]);
  });
});

/**
 * A source trigger's route on the real local stores: a workflow subscribed to a source (through
 * `createWorkflow`), the source's events dispatched, the queued jobs run by `runQueuedJob` on a
 * scripted host.
 */
describe("dispatching into a workflow, on the real stores", () => {
  async function setUp(active: boolean) {
    const jobs: RunJob[] = [];
    const { host, workflowCalls } = scriptedHost({}, undefined, async () => ({}));
    const deps = memoryDeps(NOW, {
      host,
      runs: { enqueue: async (job) => void jobs.push(job) },
      timers: { schedule: async () => {}, cancel: async () => {} },
    });
    const account = await accountIn(deps, "ada");
    const owner = { userId: account.user.id, workspaceId: account.workspace.id };
    const emitter = await deps.sources.createSource(sourceRecord(account, deps.ids.newId("source"), NOW));
    const workflow = await createWorkflow(deps, owner, {
      steps: [{ namespace: "work", component_code: "a step" }],
      triggers: [{ type: "source", props: { source_id: emitter.id } }],
      settings: { auto_deploy: active },
    });
    const append = (...values: StoredEvent["event"][]) =>
      deps.events.appendEvents(
        emitter.id,
        values.map((event, n) => ({ channel: "", event, emitId: `emit-${n}`, meta: {} })),
        NOW + 1,
      );
    const runsOf = async () => (await deps.workflowRuns.listRuns(workflow.id, { limit: 100 })).items;
    return { deps, jobs, workflowCalls, owner, emitter, workflow, append, runsOf };
  }

  it("runs each event once, however often it is dispatched", async () => {
    const t = await setUp(true);
    const events = await t.append({ n: 1 }, { n: 2 });
    await dispatchEvents(t.deps, events, t.owner);
    // The outbox sweep, or a retried Lambda, routes the same append again.
    await dispatchEvents(t.deps, events);
    expect(t.jobs).toHaveLength(4);
    const outcomes = [];
    for (const job of t.jobs) outcomes.push(await runQueuedJob(t.deps, job));
    expect(outcomes.slice(2)).toEqual([{ outcome: "done" }, { outcome: "done" }]);
    expect(t.workflowCalls.map((call) => call.trigger.event)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(t.workflowCalls.map((call) => (call.context as { source_type: string }).source_type)).toEqual([
      "EVENT",
      "EVENT",
    ]);
    const runs = await t.runsOf();
    expect(runs.map((run) => run.id).sort()).toEqual(
      events.map((e) => eventRunId(t.workflow.id, t.emitter.id, e.id)).sort(),
    );
    expect(runs.map((run) => run.trigger)).toEqual([
      { type: "event", id: t.emitter.id },
      { type: "event", id: t.emitter.id },
    ]);
  });

  it("queues an inactive workflow's runs, which are dropped when taken from the queue", async () => {
    const t = await setUp(false);
    await dispatchEvents(t.deps, await t.append({ n: 1 }), t.owner);
    expect(t.jobs).toHaveLength(1);
    expect(await runQueuedJob(t.deps, t.jobs[0] as RunJob)).toBeUndefined();
    expect(t.workflowCalls).toEqual([]);
    expect(await t.runsOf()).toEqual([]);
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
