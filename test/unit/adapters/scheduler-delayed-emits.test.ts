import {
  ConflictException,
  CreateScheduleCommand,
  DeleteScheduleCommand,
  ResourceNotFoundException,
  SchedulerClient,
  ServiceQuotaExceededException,
} from "@aws-sdk/client-scheduler";
import { DynamoDBDocumentClient, GetCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { buildAwsDeps } from "#adapters/aws/composition";
import { part as delays } from "#adapters/aws/parts/delays";
import { part as tables } from "#adapters/aws/parts/tables";
import { atExpression, delayedEmitScheduleName, SchedulerDelayedEmits } from "#adapters/aws/scheduler-delayed-emits";
import { SqliteDelayedEmits } from "#adapters/local/sqlite-delayed-emits";
import { AWS_COMPUTE_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";
import { DELAYED_EMIT_MAX_AHEAD_MS, DELAYED_EMITS_MAX_PENDING } from "#core/delayed-emits";
import type { Logger } from "#core/ports/logger";
import { deleteSourceEvents } from "#core/source-events";
import { runSource } from "#core/source-runs";
import { deleteSource } from "#core/sources";
import { delayedEmitDeliverer } from "#internal/delayed-emit-deliverer";
import type { EmitRecord } from "#runtime/protocol";
import { scriptedSource } from "../../support/scripted-sources.ts";

const schedulerMock = mockClient(SchedulerClient);
afterAll(() => schedulerMock.restore());
const DELIVERER = "arn:aws:lambda:eu-west-1:123456789012:function:SluiceService-DelayedEmitDeliverer";
const ROLE = "arn:aws:iam::123456789012:role/SluiceService-SchedulerRole";
const client = () =>
  new SchedulerClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } });

/** A scripted source whose runs emit `emits`, on `SchedulerDelayedEmits` over SQLite rows. */
async function delayedSource(emits: () => EmitRecord[], options: { target?: boolean } = {}) {
  const setup = await scriptedSource(async () => ({ emits: emits() }));
  const warnings: string[] = [];
  const log: Logger = {
    debug() {},
    info() {},
    warn: (message) => void warnings.push(message),
    error: (message) => void warnings.push(message),
    child: () => log,
  };
  const rows = new SqliteDelayedEmits(setup.deps.sqlite);
  const store = new SchedulerDelayedEmits({
    rows,
    scheduler: client(),
    groupName: "sluice-dev",
    ...(options.target === false ? {} : { target: { delivererArn: DELIVERER, roleArn: ROLE } }),
    clock: setup.deps.clock,
    log,
  });
  setup.deps.delayedEmits = store;
  const run = () => runSource(setup.deps, { sourceId: setup.source.id, trigger: "http", event: {} });
  /** The deliverer Lambda handler, on this test's stores, as Scheduler invokes it. */
  const fire = (input: unknown) => delayedEmitDeliverer(async () => setup.deps)(input);
  // What the deliverer publishes, for subscriptions and webhooks (EventBridge on AWS).
  const published: unknown[] = [];
  const bus = setup.deps.bus;
  setup.deps.bus = {
    publish: async (events, owner) => {
      published.push(...events);
      await bus.publish(events, owner);
    },
  };
  return { ...setup, rows, store, warnings, published, run, fire };
}

const created = () => schedulerMock.commandCalls(CreateScheduleCommand).map((call) => call.args[0].input);
const deleted = () => schedulerMock.commandCalls(DeleteScheduleCommand).map((call) => call.args[0].input.Name);

describe("SchedulerDelayedEmits: delayed emits on AWS", () => {
  beforeEach(() => {
    schedulerMock.reset();
    schedulerMock.on(CreateScheduleCommand).resolves({ ScheduleArn: "arn:aws:scheduler:::schedule/x" });
    schedulerMock.on(DeleteScheduleCommand).resolves({});
  });

  it("keeps a future emit on $in with a one-time schedule, and the deliverer emits it at its time, once", async () => {
    let due = 0;
    const t = await delayedSource((): EmitRecord[] => [
      { event: { task: "water plants" }, meta: { id: "t1", name: "self", delivery_ts: due } },
      { event: { now: true }, meta: {} },
    ]);
    const start = t.deps.clock.nowMs();
    due = start + 90_500;
    await t.run();

    expect((await t.channel("")).map((event) => event.event)).toEqual([{ now: true }]);
    expect(await t.channel("self")).toEqual([]);
    const [pending] = await t.channel("$in");
    expect(pending?.event).toEqual({ task: "water plants" });
    const requests = created();
    expect(requests).toEqual([
      {
        Name: `de-${t.source.id}-${pending?.id}`,
        GroupName: "sluice-dev",
        // Rounded up to the second: never early.
        ScheduleExpression: `at(${new Date(start + 91_000).toISOString().slice(0, 19)})`,
        ScheduleExpressionTimezone: "UTC",
        FlexibleTimeWindow: { Mode: "OFF" },
        State: "ENABLED",
        ActionAfterCompletion: "DELETE",
        Description: `Sluice delayed emit ${pending?.id} of ${t.source.id}`,
        Target: {
          Arn: DELIVERER,
          RoleArn: ROLE,
          Input: JSON.stringify({ sourceId: t.source.id, inEventId: pending?.id }),
          RetryPolicy: { MaximumEventAgeInSeconds: 86_400, MaximumRetryAttempts: 185 },
        },
      },
    ]);

    t.deps.clock.set(start + 91_000);
    const input = JSON.parse(requests[0]?.Target?.Input ?? "null");
    await t.fire(input);
    const delivered = await t.channel("self");
    expect(delivered.map((event) => [event.event, event.meta.id])).toEqual([[{ task: "water plants" }, "t1"]]);
    expect(t.published).toContainEqual(expect.objectContaining({ id: delivered[0]?.id, channel: "self" }));
    expect(await t.channel("$in")).toEqual([]);
    expect(await t.rows.countPending(t.source.id)).toBe(0);
    // Scheduler (or Lambda) delivering the same invocation again emits nothing more.
    await t.fire(input);
    expect(await t.channel("self")).toHaveLength(1);
    // Delivery removed only the row: Scheduler deletes a completed one-time schedule itself.
    expect(deleted()).toEqual([]);
  });

  it("cancels by deleting the $in event or the source: rows first, schedules deleted, a late fire emits nothing", async () => {
    let due = 0;
    const t = await delayedSource(() => [{ event: { n: due }, meta: { delivery_ts: due } }]);
    due = t.deps.clock.nowMs() + 60_000;
    await t.run();
    due += 1;
    await t.run();
    const [first, second] = await t.channel("$in");
    const inputs = created().map((request) => JSON.parse(request.Target?.Input ?? "null"));
    expect(inputs.map((input) => input.inEventId)).toEqual([first?.id, second?.id]);

    await deleteSourceEvents(t.deps, { userId: t.userId }, t.source.id, {
      event_name: "$in",
      start_id: first?.id,
      end_id: first?.id,
    });
    expect(deleted()).toEqual([`de-${t.source.id}-${first?.id}`]);
    t.deps.clock.set(due + 1_000);
    await t.fire(inputs[0]);
    expect(await t.channel("")).toEqual([]);

    // A schedule already gone (it fired meanwhile) is no failure.
    schedulerMock
      .on(DeleteScheduleCommand)
      .rejects(new ResourceNotFoundException({ message: "gone", Message: "gone", $metadata: {} }));
    await deleteSource(t.deps, { userId: t.userId }, t.source.id);
    expect(deleted()).toEqual([`de-${t.source.id}-${first?.id}`, `de-${t.source.id}-${second?.id}`]);
    expect(await t.rows.countPending(t.source.id)).toBe(0);
    await t.fire(inputs[1]);
    expect(await t.deps.events.listEvents(t.source.id, { limit: 10, channel: "" })).toMatchObject({ items: [] });
    expect(t.warnings).toEqual([]);
  });

  it("refuses emits past 30 days or past the source's 1,000 waiting, with one $errors event, and schedules the rest", async () => {
    let now = 0;
    const t = await delayedSource((): EmitRecord[] => [
      { event: { far: true }, meta: { delivery_ts: now + DELAYED_EMIT_MAX_AHEAD_MS + 60_000 } },
      { event: { fits: 1 }, meta: { delivery_ts: now + 60_000 } },
      { event: { fits: 2 }, meta: { delivery_ts: now + 60_000 } },
    ]);
    now = t.deps.clock.nowMs();
    const waiting = Array.from({ length: DELAYED_EMITS_MAX_PENDING - 1 }, (_, n) => ({
      sourceId: t.source.id,
      inEventId: `1-${n}`,
      dueMs: now + 10_000,
      channel: "",
      event: null,
      meta: {},
    }));
    await t.rows.add(waiting);
    await t.run();
    expect((await t.channel("$in")).map((event) => event.event)).toEqual([{ fits: 1 }]);
    expect(created()).toHaveLength(1);
    const [error] = await t.channel("$errors");
    expect(error?.event).toMatchObject({
      error: {
        code: "DelayedEmitError",
        message: expect.stringMatching(/1 with a delivery_ts more than 30 days ahead, 1 past the 1000 delayed emits/),
      },
    });
  });

  it("refuses to schedule in a function deployed without the deliverer, before writing a row", async () => {
    const t = await delayedSource(() => [], { target: false });
    const entry = { sourceId: t.source.id, inEventId: "5-0", dueMs: 0, channel: "", event: 1, meta: {} };
    await expect(t.store.add([entry])).rejects.toThrow(/deployed without the deliverer's ARN/);
    expect(await t.rows.countPending(t.source.id)).toBe(0);
    expect(created()).toEqual([]);
  });

  it("takes a schedule that exists (a run applied again) as made, and fails on Scheduler's other refusals without keeping the row", async () => {
    const t = await delayedSource(() => []);
    const entry = { sourceId: t.source.id, inEventId: "5-0", dueMs: 0, channel: "", event: 1, meta: {} };
    schedulerMock
      .on(CreateScheduleCommand)
      .rejects(new ConflictException({ message: "exists", Message: "exists", $metadata: {} }));
    await t.store.add([entry]);
    schedulerMock.on(CreateScheduleCommand).rejects(
      new ServiceQuotaExceededException({
        message: "too many schedules",
        Message: "too many schedules",
        $metadata: {},
      }),
    );
    await expect(t.store.add([{ ...entry, inEventId: "6-0" }])).rejects.toThrow(/too many schedules/);
    // The emit without a schedule would never come: its row goes, and does not count against the bound.
    expect(await t.store.get(t.source.id, "5-0")).toBeDefined();
    expect(await t.store.get(t.source.id, "6-0")).toBeUndefined();
    expect(await t.store.countPending(t.source.id)).toBe(1);
  });

  it("cancels rows without a schedule group, and says their schedules stay (they fire for nothing)", async () => {
    const setup = await scriptedSource(async () => ({}));
    const warned: string[] = [];
    const log: Logger = {
      debug() {},
      info() {},
      warn: (message) => void warned.push(message),
      error() {},
      child: () => log,
    };
    const rows = new SqliteDelayedEmits(setup.deps.sqlite);
    const store = new SchedulerDelayedEmits({ rows, scheduler: client(), clock: setup.deps.clock, log });
    await rows.add([{ sourceId: "dc_x", inEventId: "5-0", dueMs: 0, channel: "", event: 1, meta: {} }]);
    await expect(store.removeRange("dc_x")).resolves.toEqual(["5-0"]);
    expect(deleted()).toEqual([]);
    expect(warned).toEqual(["schedules of cancelled delayed emits not deleted: this function has no schedule group"]);
  });

  it("logs a schedule it could not delete, and cancels anyway", async () => {
    const t = await delayedSource(() => []);
    await t.rows.add([{ sourceId: t.source.id, inEventId: "5-0", dueMs: 0, channel: "", event: 1, meta: {} }]);
    schedulerMock.on(DeleteScheduleCommand).rejects(new Error("throttled"));
    await expect(t.store.removeRange(t.source.id)).resolves.toEqual(["5-0"]);
    expect(await t.store.get(t.source.id, "5-0")).toBeUndefined();
    expect(t.warnings).toEqual(["schedule of a cancelled delayed emit not deleted"]);
  });

  it("drops a malformed deliverer input without reading a store", async () => {
    const t = await delayedSource(() => []);
    for (const bad of [
      {},
      { sourceId: t.source.id },
      { sourceId: "p_x", inEventId: "1-0" },
      { sourceId: t.source.id, inEventId: "../x" },
    ]) {
      await t.fire(bad);
    }
    expect(await t.channel("")).toEqual([]);
  });
});

describe("delayed emit schedules", () => {
  it("are named after the source and the $in id, or a digest where that is no valid schedule name", () => {
    expect(delayedEmitScheduleName("dc_01kab00000abcdefghjkmn", "1790000000000-3")).toBe(
      "de-dc_01kab00000abcdefghjkmn-1790000000000-3",
    );
    const long = delayedEmitScheduleName(`dc_${"x".repeat(64)}`, "1790000000000-3");
    expect(long).toMatch(/^de-[0-9a-f]{40}$/);
    expect(delayedEmitScheduleName(`dc_${"y".repeat(64)}`, "1790000000000-3")).not.toBe(long);
  });

  it("fire at the emit's second rounded up, and never less than a second from now", () => {
    const now = Date.parse("2026-11-26T12:00:00.000Z");
    expect(atExpression(now + 5_000, now)).toBe("at(2026-11-26T12:00:05)");
    expect(atExpression(now + 5_001, now)).toBe("at(2026-11-26T12:00:06)");
    expect(atExpression(now - 60_000, now)).toBe("at(2026-11-26T12:00:01)");
  });
});

describe("the AWS composition's delayed emits", () => {
  const ddb = mockClient(DynamoDBDocumentClient);
  afterAll(() => ddb.restore());
  const scheduling = {
    [ENV.resourcesTable]: "resources-x",
    [AWS_COMPUTE_ENV.scheduleGroup]: "sluice-dev",
    [AWS_COMPUTE_ENV.schedulerRoleArn]: ROLE,
    [AWS_COMPUTE_ENV.delayedEmitDelivererArn]: DELIVERER,
  };

  it("holds delayed emits in the resources table, and schedules them only where the deliverer is named", async () => {
    ddb.reset();
    ddb.on(QueryCommand).resolves({ Count: 3 });
    const deps = buildAwsDeps([tables, delays], scheduling);
    await expect(deps.delayedEmits?.countPending("dc_x")).resolves.toBe(3);
    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toMatchObject({
      TableName: "resources-x",
      KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
      ExpressionAttributeValues: { ":pk": "DLY#dc_x", ":prefix": "IN#" },
      Select: "COUNT",
    });
    const cancelOnly = buildAwsDeps([tables, delays], {
      [ENV.resourcesTable]: "resources-x",
      [AWS_COMPUTE_ENV.scheduleGroup]: "sluice-dev",
    });
    const entry = { sourceId: "dc_x", inEventId: "5-0", dueMs: 0, channel: "", event: 1, meta: {} };
    await expect(cancelOnly.delayedEmits?.add([entry])).rejects.toThrow(/deployed without the deliverer's ARN/);
  });

  it("lets the deliverer, deployed with the table alone, read the row a schedule names", async () => {
    ddb.reset();
    ddb.on(GetCommand).resolves({});
    const deps = buildAwsDeps([tables, delays], { [ENV.resourcesTable]: "resources-x" });
    // No row (delivered or cancelled): nothing to emit, and no failure for Lambda to retry.
    await delayedEmitDeliverer(async () => deps)({ sourceId: "dc_x", inEventId: "1790000000000-2" });
    expect(ddb.commandCalls(GetCommand).map((call) => call.args[0].input)).toEqual([
      {
        TableName: "resources-x",
        Key: { pk: "DLY#dc_x", sk: "BODY#001790000000000-000000002" },
        ConsistentRead: true,
      },
    ]);
  });
});
