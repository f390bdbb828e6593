import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  BatchWriteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  QueryCommand,
  TransactWriteCommand,
} from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbWorkflowStore } from "#adapters/aws/dynamodb-workflow-store";
import type { HttpTriggerRecord, WorkflowRecord } from "#core/workflow-model";
import { cancelled, failedAt, transactionItems } from "../../support/dynamodb-requests.ts";

const TABLE = "resources-test";
const { put, del } = transactionItems(TABLE);
const ddb = mockClient(DynamoDBDocumentClient);
const store = new DynamoDbWorkflowStore(documentClient(new DynamoDBClient({ region: "local" })), TABLE);

const timerSpec = { intervalSeconds: 60 };
const workflow: WorkflowRecord = {
  id: "p_1",
  userId: "u_1",
  workspaceId: "o_1",
  projectId: "proj_1",
  name: "Orders",
  active: true,
  deploymentId: "d_1",
  externalId: "ci#1",
  requestHash: "h1",
  steps: [
    { id: "c_1", namespace: "a", disabled: false, origin: "code", componentId: "sc_1", configuredProps: { n: 1 } },
  ],
  triggers: [
    { type: "http", id: "hi_1", key: "k1", customResponse: false, createdAt: 1, updatedAt: 1 },
    { type: "timer", id: "ti_1", spec: timerSpec, scheduleChangedAt: 1, createdAt: 1, updatedAt: 1 },
  ],
  createdAt: 10,
  updatedAt: 11,
};
const attributes = (w: WorkflowRecord) => ({
  ...w,
  steps: JSON.stringify(w.steps),
  triggers: JSON.stringify(w.triggers),
});
const recordItem = (w: WorkflowRecord, rev: number) => ({
  pk: `WF#${w.id}`,
  sk: "WF",
  type: "workflow",
  rev,
  ...attributes(w),
});
const transactions = () => ddb.commandCalls(TransactWriteCommand).map((call) => call.args[0].input.TransactItems);

beforeEach(() => {
  ddb.reset();
});

describe("DynamoDbWorkflowStore.createWorkflow", () => {
  it("writes the record, both copies, the external id guard, the endpoint copy and the timer in one transaction of new items", async () => {
    await store.createWorkflow(workflow);
    const isNew = "attribute_not_exists(pk)";
    expect(transactions()).toEqual([
      [
        put(recordItem(workflow, 1), isNew),
        put({ pk: "USER#u_1", sk: "WF#p_1", type: "workflowOfUser", ...attributes(workflow) }, isNew),
        put({ pk: "WS#o_1", sk: "WF#p_1", type: "workflowOfWorkspace", ...attributes(workflow) }, isNew),
        // `#` and `%` of an external id are encoded, so the id cannot forge a key of its own.
        put(
          { pk: "WS#o_1", sk: "WFEXT#ci%231", type: "workflowExternalId", workflowId: "p_1", requestHash: "h1" },
          isNew,
        ),
        put(
          {
            pk: "WFENDPOINT#k1",
            sk: "WFENDPOINT",
            type: "workflowEndpoint",
            ...attributes(workflow),
            triggerId: "hi_1",
          },
          isNew,
        ),
        put(
          {
            pk: "TIMERS",
            sk: "TI#ti_1",
            type: "activeWorkflowTimer",
            workflowId: "p_1",
            timerId: "ti_1",
            spec: timerSpec,
          },
          isNew,
        ),
      ],
    ]);
  });

  it("writes no timer item for an inactive workflow and no guard without an external id", async () => {
    const { externalId: _e, requestHash: _h, ...plain } = workflow;
    await store.createWorkflow({ ...plain, active: false });
    expect(transactions()[0]?.map((item) => item.Put?.Item?.type)).toEqual([
      "workflow",
      "workflowOfUser",
      "workflowOfWorkspace",
      "workflowEndpoint",
    ]);
  });

  it("names the guard that failed: a taken key, a taken external id, an existing id", async () => {
    ddb.on(TransactWriteCommand).rejectsOnce(failedAt(4, 6)).rejectsOnce(failedAt(3, 6)).rejectsOnce(failedAt(0, 6));
    await expect(store.createWorkflow(workflow)).rejects.toMatchObject({
      code: "conflict",
      message: "an HTTP trigger's key is in use already",
    });
    await expect(store.createWorkflow(workflow)).rejects.toMatchObject({
      code: "conflict",
      message: "external_id ci#1 names another workflow of this workspace",
    });
    await expect(store.createWorkflow(workflow)).rejects.toMatchObject({
      code: "conflict",
      message: "workflow p_1 exists already",
    });
  });

  it("goes again when a concurrent transaction held one of its items", async () => {
    ddb
      .on(TransactWriteCommand)
      .rejectsOnce(cancelled(["None", "TransactionConflict", "None", "None", "None", "None"]))
      .resolves({});
    await store.createWorkflow(workflow);
    expect(transactions()).toHaveLength(2);
  });

  it("refuses two HTTP triggers with one key as a conflict without sending anything", async () => {
    const http = workflow.triggers[0] as HttpTriggerRecord;
    await expect(
      store.createWorkflow({ ...workflow, triggers: [http, { ...http, id: "hi_2" }] }),
    ).rejects.toMatchObject({
      code: "conflict",
    });
    expect(transactions()).toHaveLength(0);
  });

  it("refuses a record over 300 KB, and copies that would pass the 4 MB of a transaction, without writing", async () => {
    const withProps = (bytes: number, httpTriggers: number): WorkflowRecord => ({
      ...workflow,
      steps: [{ ...workflow.steps[0]!, configuredProps: { blob: "x".repeat(bytes) } }],
      triggers: Array.from({ length: httpTriggers }, (_, i) => ({
        ...workflow.triggers[0]!,
        id: `hi_${i}`,
        key: `k${i}`,
      })),
    });
    await expect(store.createWorkflow(withProps(301 * 1024, 1))).rejects.toMatchObject({
      code: "payload_too_large",
      message: expect.stringMatching(/^the workflow is too large to store: \d+ bytes, at most 307200$/),
    });
    await expect(store.createWorkflow(withProps(290 * 1024, 10))).rejects.toMatchObject({
      code: "payload_too_large",
      message: expect.stringContaining("the workflow's 14 items (record, copies and guards) are too large"),
    });
    await expect(store.createWorkflow(withProps(290 * 1024, 1))).resolves.toBeUndefined();
    expect(transactions()).toHaveLength(1);
  });
});

describe("DynamoDbWorkflowStore.updateWorkflow", () => {
  const moved: WorkflowRecord = {
    ...workflow,
    active: false,
    externalId: "ci-2",
    triggers: [{ type: "http", id: "hi_1", key: "k2", customResponse: true, createdAt: 1, updatedAt: 2 }],
  };

  it("conditions the record on its revision and the guards on being free or its own, and deletes what it dropped", async () => {
    ddb.on(GetCommand).resolves({ Item: recordItem(workflow, 3) });
    await store.updateWorkflow(moved);
    expect(transactions()).toEqual([
      [
        put(recordItem(moved, 4), "rev = :rev", { ":rev": 3 }),
        put({ pk: "USER#u_1", sk: "WF#p_1", type: "workflowOfUser", ...attributes(moved) }),
        put({ pk: "WS#o_1", sk: "WF#p_1", type: "workflowOfWorkspace", ...attributes(moved) }),
        put(
          { pk: "WS#o_1", sk: "WFEXT#ci-2", type: "workflowExternalId", workflowId: "p_1", requestHash: "h1" },
          "attribute_not_exists(pk) OR workflowId = :id",
          { ":id": "p_1" },
        ),
        put(
          { pk: "WFENDPOINT#k2", sk: "WFENDPOINT", type: "workflowEndpoint", ...attributes(moved), triggerId: "hi_1" },
          "attribute_not_exists(pk) OR id = :id",
          { ":id": "p_1" },
        ),
        del({ pk: "WS#o_1", sk: "WFEXT#ci%231" }),
        del({ pk: "WFENDPOINT#k1", sk: "WFENDPOINT" }),
        del({ pk: "TIMERS", sk: "TI#ti_1" }),
      ],
    ]);
  });

  it("reads again and retries on a fresh revision when another write changed the record first", async () => {
    ddb
      .on(GetCommand)
      .resolvesOnce({ Item: recordItem(workflow, 1) })
      .resolves({ Item: recordItem(moved, 2) });
    ddb.on(TransactWriteCommand).rejectsOnce(failedAt(0, 8)).resolves({});
    await store.updateWorkflow(moved);
    const [first, second] = transactions();
    expect([first?.[0]?.Put?.Item?.rev, second?.[0]?.Put?.Item?.rev]).toEqual([2, 3]);
    // The second write starts from what the other writer stored: nothing is left to delete.
    expect(second?.filter((item) => item.Delete)).toEqual([]);
  });

  it("reports another workflow's key as a conflict and answers not_found for a missing workflow", async () => {
    ddb
      .on(GetCommand)
      .resolvesOnce({ Item: recordItem(workflow, 1) })
      .resolves({});
    ddb.on(TransactWriteCommand).rejects(failedAt(4, 8));
    await expect(store.updateWorkflow(moved)).rejects.toMatchObject({
      code: "conflict",
      message: "an HTTP trigger's key is in use already",
    });
    await expect(store.updateWorkflow(moved)).rejects.toMatchObject({ code: "not_found" });
    expect(transactions()).toHaveLength(1);
  });
});

describe("DynamoDbWorkflowStore.deleteWorkflow", () => {
  it("deletes the record on its revision with every copy and guard, then the step states in batches", async () => {
    ddb.on(GetCommand).resolves({ Item: recordItem(workflow, 7) });
    ddb.on(QueryCommand).resolves({ Items: [{ pk: "WF#p_1", sk: "STATE#c_1" }] });
    ddb.on(BatchWriteCommand).resolves({});
    await store.deleteWorkflow("p_1");
    expect(transactions()).toEqual([
      [
        del({ pk: "WF#p_1", sk: "WF" }, "rev = :rev", { ":rev": 7 }),
        del({ pk: "USER#u_1", sk: "WF#p_1" }),
        del({ pk: "WS#o_1", sk: "WF#p_1" }),
        del({ pk: "WS#o_1", sk: "WFEXT#ci%231" }),
        del({ pk: "WFENDPOINT#k1", sk: "WFENDPOINT" }),
        del({ pk: "TIMERS", sk: "TI#ti_1" }),
      ],
    ]);
    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toMatchObject({
      ExpressionAttributeValues: { ":pk": "WF#p_1", ":prefix": "STATE#" },
      ProjectionExpression: "pk, sk",
    });
    expect(ddb.commandCalls(BatchWriteCommand)[0]?.args[0].input.RequestItems).toEqual({
      [TABLE]: [{ DeleteRequest: { Key: { pk: "WF#p_1", sk: "STATE#c_1" } } }],
    });
  });

  it("only removes leftover step states when the workflow is already gone", async () => {
    ddb.on(GetCommand).resolves({});
    ddb.on(QueryCommand).resolves({ Items: [] });
    await store.deleteWorkflow("p_1");
    expect(transactions()).toHaveLength(0);
    expect(ddb.commandCalls(QueryCommand)).toHaveLength(1);
  });
});

describe("DynamoDbWorkflowStore reads", () => {
  it("finds a workflow by HTTP key with one consistent get of its own WFENDPOINT partition", async () => {
    ddb.on(GetCommand).resolves({
      Item: {
        pk: "WFENDPOINT#k1",
        sk: "WFENDPOINT",
        type: "workflowEndpoint",
        ...attributes(workflow),
        triggerId: "hi_1",
      },
    });
    await expect(store.findWorkflowByHttpKey("k1")).resolves.toStrictEqual(workflow);
    expect(ddb.commandCalls(GetCommand).map((call) => call.args[0].input)).toEqual([
      { TableName: TABLE, Key: { pk: "WFENDPOINT#k1", sk: "WFENDPOINT" }, ConsistentRead: true },
    ]);
  });

  it("finds by external id through the guard, and not when the record no longer holds that id", async () => {
    ddb
      .on(GetCommand, { Key: { pk: "WS#o_1", sk: "WFEXT#ci%231" } })
      .resolves({ Item: { workflowId: "p_1" } })
      .on(GetCommand, { Key: { pk: "WF#p_1", sk: "WF" } })
      .resolvesOnce({ Item: recordItem(workflow, 1) })
      .resolves({ Item: recordItem({ ...workflow, externalId: "other" }, 2) });
    await expect(store.findWorkflowByExternalId("o_1", "ci#1")).resolves.toStrictEqual(workflow);
    await expect(store.findWorkflowByExternalId("o_1", "ci#1")).resolves.toBeUndefined();
  });

  it("answers none for a key or external id longer than DynamoDB's key limits, without a request", async () => {
    await expect(store.findWorkflowByHttpKey("k".repeat(2100))).resolves.toBeUndefined();
    await expect(store.findWorkflowByExternalId("o_1", "é".repeat(600))).resolves.toBeUndefined();
    expect(ddb.commandCalls(GetCommand)).toHaveLength(0);
  });

  it("lists active timers from the TI# items of TIMERS only, every page", async () => {
    const timer = (id: string) => ({ pk: "TIMERS", sk: `TI#${id}`, workflowId: "p_1", timerId: id, spec: timerSpec });
    ddb
      .on(QueryCommand)
      .resolvesOnce({ Items: [timer("ti_1")], LastEvaluatedKey: { pk: "TIMERS", sk: "TI#ti_1" } })
      .resolvesOnce({ Items: [timer("ti_2")] });
    await expect(store.listActiveTimerTriggers()).resolves.toStrictEqual([
      { workflowId: "p_1", timerId: "ti_1", spec: timerSpec },
      { workflowId: "p_1", timerId: "ti_2", spec: timerSpec },
    ]);
    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toMatchObject({
      ExpressionAttributeValues: { ":pk": "TIMERS", ":prefix": "TI#" },
      ConsistentRead: true,
    });
  });
});

describe("DynamoDbWorkflowStore step states", () => {
  it("writes several steps in one transaction, each conditioned on its version", async () => {
    await store.putStepStates("p_1", [
      { stepId: "c_1", db: { a: 1 }, expectedVersion: 0 },
      { stepId: "c_2", db: {}, expectedVersion: 4 },
    ]);
    const state = (stepId: string, db: string, version: number) => ({
      pk: "WF#p_1",
      sk: `STATE#${stepId}`,
      type: "stepState",
      workflowId: "p_1",
      stepId,
      db,
      version,
    });
    expect(transactions()).toEqual([
      [
        put(state("c_1", '{"a":1}', 1), "attribute_not_exists(pk)"),
        put(state("c_2", "{}", 5), "version = :expected", { ":expected": 4 }),
      ],
    ]);
  });

  it("reports a failed version as a conflict naming the step, and retries a transaction conflict", async () => {
    ddb
      .on(TransactWriteCommand)
      .rejectsOnce(cancelled(["None", "TransactionConflict"]))
      .rejectsOnce(failedAt(1, 2));
    const writes = [
      { stepId: "c_1", db: {}, expectedVersion: 1 },
      { stepId: "c_2", db: {}, expectedVersion: 1 },
    ];
    await expect(store.putStepStates("p_1", writes)).rejects.toMatchObject({
      code: "conflict",
      message: "the state of step c_2 was changed by another run",
    });
    expect(transactions()).toHaveLength(2);
  });

  it("sends nothing for no writes, and refuses a state over its item limit or a step written twice", async () => {
    await store.putStepStates("p_1", []);
    await expect(
      store.putStepStates("p_1", [{ stepId: "c_1", db: { big: "x".repeat(351 * 1024) }, expectedVersion: 0 }]),
    ).rejects.toMatchObject({ code: "payload_too_large" });
    const twice = { stepId: "c_1", db: {}, expectedVersion: 0 };
    await expect(store.putStepStates("p_1", [twice, twice])).rejects.toMatchObject({ code: "conflict" });
    expect(transactions()).toHaveLength(0);
  });

  it("reads a workflow's states with one consistent query of its STATE# items", async () => {
    ddb.on(QueryCommand).resolves({ Items: [{ stepId: "c_1", db: '{"k":[1]}', version: 3 }] });
    await expect(store.getStepStates("p_1")).resolves.toStrictEqual({ c_1: { db: { k: [1] }, version: 3 } });
    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toMatchObject({
      ExpressionAttributeValues: { ":pk": "WF#p_1", ":prefix": "STATE#" },
      ConsistentRead: true,
    });
  });
});
