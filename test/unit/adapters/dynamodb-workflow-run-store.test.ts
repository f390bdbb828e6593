import { type AttributeValue, ConditionalCheckFailedException, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  BatchWriteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
} from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbWorkflowRunStore, fitRunRecord } from "#adapters/aws/dynamodb-workflow-run-store";
import type { RunLogRecord, WorkflowRun } from "#core/workflow-model";

const TABLE = "resources-test";
const DAY_MS = 86_400_000;
const ddb = mockClient(DynamoDBDocumentClient);
const documents = documentClient(new DynamoDBClient({ region: "local" }));
let nowMs = 0;
const store = new DynamoDbWorkflowRunStore(documents, TABLE, {
  retention: { maxAgeMs: DAY_MS, keepPerChannel: 0 },
  clock: { nowMs: () => nowMs },
});
const keptForever = new DynamoDbWorkflowRunStore(documents, TABLE, { retention: { maxAgeMs: 0, keepPerChannel: 0 } });

const START_MS = 1_790_000_000_000;
const run: WorkflowRun = {
  id: "run_1",
  workflowId: "p_1",
  deploymentId: "d_1",
  trigger: { type: "timer", id: "ti_1" },
  status: "running",
  leaseUntilMs: START_MS + 60_000,
  attempts: 0,
  startedAt: START_MS,
  eventPreview: { a: 1 },
  steps: [],
  logs: [],
};
const { attempts: _attempts, ...withoutAttempts } = run;

function failedWith(item?: Record<string, AttributeValue>) {
  return new ConditionalCheckFailedException({ message: "failed", $metadata: {}, ...(item ? { Item: item } : {}) });
}

beforeEach(() => {
  ddb.reset();
  nowMs = START_MS;
});

describe("DynamoDbWorkflowRunStore.beginRun", () => {
  it("claims a run with one conditional UpdateItem that counts attempts and sets the TTL from its start", async () => {
    ddb.on(UpdateCommand).resolves({ Attributes: { attempts: 3 } });
    await expect(store.beginRun(run, START_MS + 5)).resolves.toStrictEqual({
      outcome: "started",
      run: { ...run, attempts: 3 },
    });
    expect(ddb.commandCalls(UpdateCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "WFRUN#p_1", sk: "RUN#run_1" },
      UpdateExpression:
        "SET #type = :type, workflowId = :workflowId, id = :id, #status = :running, leaseUntilMs = :lease, " +
        "startedAt = :startedAt, #record = :record, attempts = if_not_exists(attempts, :zero) + :one, #ttl = :expiresAt",
      ConditionExpression: "attribute_not_exists(pk) OR (#status = :running AND leaseUntilMs < :now)",
      ExpressionAttributeNames: { "#type": "type", "#status": "status", "#record": "record", "#ttl": "expiresAt" },
      ExpressionAttributeValues: {
        ":type": "workflowRun",
        ":workflowId": "p_1",
        ":id": "run_1",
        ":running": "running",
        ":lease": START_MS + 60_000,
        ":startedAt": START_MS,
        // `attempts` is counted by DynamoDB, so the record's JSON leaves it out.
        ":record": JSON.stringify(withoutAttempts),
        ":zero": 0,
        ":one": 1,
        ":now": START_MS + 5,
        ":expiresAt": (START_MS + DAY_MS) / 1000,
      },
      ReturnValues: "UPDATED_NEW",
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    });
  });

  it("sets no TTL when runs are kept forever", async () => {
    ddb.on(UpdateCommand).resolves({ Attributes: { attempts: 1 } });
    await keptForever.beginRun(run, START_MS);
    const input = ddb.commandCalls(UpdateCommand)[0]?.args[0].input;
    expect(input?.UpdateExpression).not.toContain("#ttl");
    expect(input?.ExpressionAttributeNames).not.toHaveProperty("#ttl");
  });

  it("tells done from busy by the item returned with the failed condition, without a read", async () => {
    ddb
      .on(UpdateCommand)
      .rejectsOnce(failedWith({ status: { S: "success" }, leaseUntilMs: { N: "5" } }))
      .rejectsOnce(failedWith({ status: { S: "running" }, leaseUntilMs: { N: String(START_MS + 9) } }))
      .rejectsOnce(failedWith());
    await expect(store.beginRun(run, START_MS)).resolves.toStrictEqual({ outcome: "done" });
    await expect(store.beginRun(run, START_MS)).resolves.toStrictEqual({ outcome: "busy", leaseUntilMs: START_MS + 9 });
    // Without the item (never, as DynamoDB answers) the failure is not guessed at.
    await expect(store.beginRun(run, START_MS)).rejects.toThrow("failed");
    expect(ddb.commandCalls(GetCommand)).toHaveLength(0);
  });
});

describe("DynamoDbWorkflowRunStore.finishRun", () => {
  const finished: WorkflowRun = { ...run, attempts: 2, status: "success", endedAt: START_MS + 7, durationMs: 7 };

  it("puts the ended run only over the same attempt still running", async () => {
    await store.finishRun(finished);
    const { attempts: _a, ...record } = finished;
    expect(ddb.commandCalls(PutCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Item: {
        pk: "WFRUN#p_1",
        sk: "RUN#run_1",
        type: "workflowRun",
        workflowId: "p_1",
        id: "run_1",
        status: "success",
        leaseUntilMs: START_MS + 60_000,
        startedAt: START_MS,
        attempts: 2,
        record: JSON.stringify(record),
        expiresAt: (START_MS + DAY_MS) / 1000,
      },
      ConditionExpression: "#status = :running AND attempts = :attempts",
      ExpressionAttributeNames: { "#status": "status" },
      ExpressionAttributeValues: { ":running": "running", ":attempts": 2 },
    });
  });

  it("leaves a run taken over, ended or deleted as it is, and lets other failures through", async () => {
    ddb.on(PutCommand).rejectsOnce(failedWith()).rejectsOnce(new Error("throttled"));
    await expect(store.finishRun(finished)).resolves.toBeUndefined();
    await expect(store.finishRun(finished)).rejects.toThrow("throttled");
  });
});

describe("DynamoDbWorkflowRunStore reads", () => {
  const item = (r: WorkflowRun, expiresAt: number) => {
    const { attempts, ...record } = r;
    return { pk: "WFRUN#p_1", sk: `RUN#${r.id}`, attempts, record: JSON.stringify(record), expiresAt };
  };

  it("reads a run with its attempts, and not once it is past its expiresAt (TTL deletes it days later)", async () => {
    const expiresAt = (START_MS + DAY_MS) / 1000;
    ddb.on(GetCommand).resolves({ Item: item({ ...run, attempts: 2 }, expiresAt) });
    await expect(store.getRun("p_1", "run_1")).resolves.toStrictEqual({ ...run, attempts: 2 });
    nowMs = START_MS + DAY_MS;
    await expect(store.getRun("p_1", "run_1")).resolves.toBeUndefined();
    // Kept forever: an item of an earlier retention setting is still read.
    ddb.on(GetCommand).resolves({ Item: item({ ...run, attempts: 2 }, 1) });
    await expect(keptForever.getRun("p_1", "run_1")).resolves.toMatchObject({ id: "run_1" });
    expect(ddb.commandCalls(GetCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "WFRUN#p_1", sk: "RUN#run_1" },
      ConsistentRead: true,
    });
  });

  it("answers none for a run id longer than DynamoDB's sort key limit, without a request", async () => {
    await expect(store.getRun("p_1", `run_${"x".repeat(1100)}`)).resolves.toBeUndefined();
    expect(ddb.commandCalls(GetCommand)).toHaveLength(0);
  });

  it("lists runs newest first, skipping and not counting expired ones", async () => {
    nowMs = START_MS + 1500;
    ddb
      .on(QueryCommand, { Select: "COUNT" })
      .resolves({ Count: 1 })
      .on(QueryCommand, { ScanIndexForward: false })
      .resolves({ Items: [item({ ...run, attempts: 1 }, 9e9)] });
    await expect(store.listRuns("p_1", { limit: 5 })).resolves.toStrictEqual({
      items: [{ ...run, attempts: 1 }],
      totalCount: 1,
    });
    const filtered = {
      TableName: TABLE,
      KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
      FilterExpression: "attribute_not_exists(#ttl) OR #ttl > :now",
      ExpressionAttributeNames: { "#ttl": "expiresAt" },
      ExpressionAttributeValues: { ":pk": "WFRUN#p_1", ":prefix": "RUN#", ":now": START_MS / 1000 + 1 },
      ConsistentRead: true,
    };
    const inputs = ddb.commandCalls(QueryCommand).map((call) => call.args[0].input);
    expect(inputs).toContainEqual({ ...filtered, Select: "COUNT" });
    expect(inputs).toContainEqual({ ...filtered, ScanIndexForward: false, Limit: 5 });
  });

  it("deletes a workflow's runs from a keys-only query, in batches", async () => {
    ddb.on(QueryCommand).resolves({ Items: [{ pk: "WFRUN#p_1", sk: "RUN#run_1" }] });
    ddb.on(BatchWriteCommand).resolves({});
    await store.deleteRuns("p_1");
    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toMatchObject({
      ExpressionAttributeValues: { ":pk": "WFRUN#p_1", ":prefix": "RUN#" },
      ProjectionExpression: "pk, sk",
    });
    expect(ddb.commandCalls(BatchWriteCommand)[0]?.args[0].input.RequestItems).toEqual({
      [TABLE]: [{ DeleteRequest: { Key: { pk: "WFRUN#p_1", sk: "RUN#run_1" } } }],
    });
  });
});

describe("fitRunRecord", () => {
  const line = (i: number): RunLogRecord => ({
    ts: START_MS + i,
    level: "info",
    message: `line ${i} ${"x".repeat(90)}`,
    step: "send",
  });
  const size = (r: WorkflowRun) => Buffer.byteLength(JSON.stringify(r), "utf8");

  it("returns a run within the limit as it is", () => {
    const small = { ...run, logs: [line(1)] };
    expect(fitRunRecord(small, 4096)).toBe(small);
  });

  it("cuts the newest log lines first, keeping the oldest and saying how many went", () => {
    const noisy = { ...run, logs: Array.from({ length: 100 }, (_, i) => line(i)) };
    const fitted = fitRunRecord(noisy, 4096);
    expect(size(fitted)).toBeLessThanOrEqual(4096);
    const kept = fitted.logs.length - 1;
    expect(kept).toBeGreaterThan(20);
    expect(fitted.logs.slice(0, kept)).toStrictEqual(noisy.logs.slice(0, kept));
    expect(fitted.logs[kept]).toStrictEqual({
      ts: START_MS + 99,
      level: "warn",
      message: `${100 - kept} log lines were cut to keep the run record under 4096 bytes`,
      step: "send",
    });
    // One more line would not have fitted.
    expect(size({ ...fitted, logs: [...noisy.logs.slice(0, kept + 1), fitted.logs[kept]!] })).toBeGreaterThan(4096);
  });

  it("cuts the error message, exit reason and summaries when the run is too large even without logs", () => {
    const big: WorkflowRun = {
      ...run,
      status: "error",
      steps: [{ id: "c_1", namespace: "a", status: "error", summary: "s".repeat(200), durationMs: 1, exportBytes: 0 }],
      error: { code: "Error", cellId: "c_1", message: "m".repeat(5000) },
      exitReason: "r".repeat(5000),
      logs: [line(1)],
    };
    const fitted = fitRunRecord(big, 4096);
    expect(fitted.logs).toEqual([]);
    expect(fitted.error).toStrictEqual({ code: "Error", cellId: "c_1", message: "m".repeat(1024) });
    expect(fitted.exitReason).toBe("r".repeat(1024));
    expect(fitted.steps).toStrictEqual([{ id: "c_1", namespace: "a", status: "error", durationMs: 1, exportBytes: 0 }]);
    expect(() => fitRunRecord(big, 1024)).toThrow(expect.objectContaining({ code: "payload_too_large" }));
  });

  it("is what both writes store: an oversized run is begun and finished within 64 KB", async () => {
    ddb.on(UpdateCommand).resolves({ Attributes: { attempts: 1 } });
    const noisy = { ...run, logs: Array.from({ length: 1000 }, (_, i) => line(i)) };
    const begun = await store.beginRun(noisy, START_MS);
    expect(begun.outcome === "started" && begun.run.logs.length).toBeLessThan(1000);
    const record = String(ddb.commandCalls(UpdateCommand)[0]?.args[0].input.ExpressionAttributeValues?.[":record"]);
    expect(Buffer.byteLength(record, "utf8")).toBeLessThanOrEqual(64 * 1024);
    await store.finishRun({ ...noisy, attempts: 1, status: "success" });
    const stored = String(ddb.commandCalls(PutCommand)[0]?.args[0].input.Item?.record);
    expect(Buffer.byteLength(stored, "utf8")).toBeLessThanOrEqual(64 * 1024);
  });
});
