import { randomBytes } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TransactionCanceledException } from "@aws-sdk/client-dynamodb";
import { GenerateDataKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import {
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
} from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { buildAwsDeps } from "#adapters/aws/composition";
import { part as secrets } from "#adapters/aws/parts/secrets";
import { part as tables } from "#adapters/aws/parts/tables";
import { DEFAULT_REGISTRY_DIR } from "#adapters/registry-files";
import { AWS_COMPUTE_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";
import { APPS_ASSET, APPS_FILE_NAME, OPERATOR_APPS_FILE } from "#config/shared-names";
import { createKeyAccount } from "#core/connected-account-api";
import type { AppAccountRecord } from "#core/ports/app-account-store";

const ddb = mockClient(DynamoDBDocumentClient);
const kms = mockClient(KMSClient);
afterAll(() => {
  ddb.restore();
  kms.restore();
});

const TABLE = "resources-x";
const KEY_ARN = "arn:aws:kms:us-east-1:111122223333:key/accounts";
const SECRET = "sk-live-sealed-by-kms";

/** A task root laid out as the bundle of an API route with the apps asset (lib/constructs/apps-asset.ts). */
function taskRoot(operatorApps?: unknown) {
  const root = mkdtempSync(join(tmpdir(), "sluice-task-"));
  mkdirSync(join(root, APPS_ASSET));
  copyFileSync(join(DEFAULT_REGISTRY_DIR, APPS_FILE_NAME), join(root, APPS_ASSET, APPS_FILE_NAME));
  if (operatorApps) writeFileSync(join(root, APPS_ASSET, OPERATOR_APPS_FILE), JSON.stringify(operatorApps));
  return root;
}

const env = (root: string) => ({
  [ENV.resourcesTable]: TABLE,
  [AWS_COMPUTE_ENV.secretsKeyArn]: KEY_ARN,
  LAMBDA_TASK_ROOT: root,
});

beforeEach(() => {
  ddb.reset();
  kms.reset();
});

describe("connected accounts in the AWS composition", () => {
  it("reads the bundled catalog (shipped apps and the operator's file) and seals credentials with the KMS key", async () => {
    const operator = { apps: [{ name_slug: "acme", name: "Acme", auth_type: "keys", fields: ["token"] }] };
    const deps = buildAwsDeps([tables, secrets], env(taskRoot(operator)));
    expect(deps.apps.find("acme")).toMatchObject({ name: "Acme", fields: ["token"] });
    expect(deps.apps.find("postgresql")?.authType).toBe("keys");

    ddb.on(GetCommand).resolves({ Item: { pk: "WS#o_1", sk: "MEMBER#u_1", role: "owner" } });
    ddb.on(QueryCommand).resolves({ Count: 0, Items: [] });
    ddb.on(TransactWriteCommand).resolves({});
    kms.on(GenerateDataKeyCommand).resolves({
      Plaintext: new Uint8Array(randomBytes(32)),
      CiphertextBlob: new Uint8Array(Buffer.from("encrypted-data-key")),
    });
    // The workspace lookup of the caller answers from the membership's and workspace's items.
    ddb.on(GetCommand, { Key: { pk: "WS#o_1", sk: "WS" } }).resolves({
      Item: {
        pk: "WS#o_1",
        sk: "WS",
        id: "o_1",
        orgname: "ada",
        name: "Ada",
        email: "a@x",
        createdAt: 1,
        updatedAt: 1,
      },
    });
    await createKeyAccount(deps, { userId: "u_1" } as never, {
      app: "acme",
      credentials: { token: SECRET },
      workspace_id: "o_1",
    });

    expect(kms.commandCalls(GenerateDataKeyCommand)[0]?.args[0].input).toMatchObject({ KeyId: KEY_ARN });
    const items = (ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems ?? []).map(
      (entry) => entry.Put?.Item ?? {},
    );
    expect(items.map((item) => [item.pk, item.sk])).toEqual([
      [expect.stringMatching(/^ACCT#apn_/), "ACCT"],
      ["WS#o_1", expect.stringMatching(/^ACCT#apn_/)],
    ]);
    for (const item of items) {
      expect(item.sealedCredentials).toMatch(/^kms1\./);
      expect(JSON.stringify(item)).not.toContain(SECRET);
    }
  });

  it("fails saying what is missing when a function without the apps asset reads an app", () => {
    const deps = buildAwsDeps([tables], env(mkdtempSync(join(tmpdir(), "sluice-task-"))));
    expect(() => deps.apps.find("postgresql")).toThrow(/the app catalog is not in this function's bundle/);
  });
});

describe("DynamoDbAppAccountStore requests", () => {
  const deps = buildAwsDeps([tables], env(taskRoot()));
  const record: AppAccountRecord = {
    id: "apn_1",
    workspaceId: "o_1",
    ownerId: "u_1",
    app: "github",
    name: "GitHub",
    sealedCredentials: "kms1.x",
    expiresAt: 1_790_000_000_000,
    healthy: true,
    createdAt: 1,
    updatedAt: 2,
    version: 3,
  };

  const expiryKey = (ms: number) => ({ pk: "ACCTEXPIRY", sk: `${String(ms).padStart(15, "0")}#apn_1` });
  const storedItem = {
    ...record,
    pk: "ACCT#apn_1",
    sk: "ACCT",
    type: "appAccount",
    tokenExpiresAtMs: record.expiresAt,
  };

  it("keeps a token's expiry out of the table's TTL attribute, so DynamoDB never deletes an account when its token expires", async () => {
    ddb.on(TransactWriteCommand).resolves({});
    await deps.appAccounts.create(record);
    const items = ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems ?? [];
    expect(items).toHaveLength(3);
    for (const entry of items) {
      expect(entry.Put?.Item).not.toHaveProperty("expiresAt");
      expect(entry.Put?.ConditionExpression).toBe("attribute_not_exists(pk)");
    }
    for (const entry of items.slice(0, 2))
      expect(entry.Put?.Item).toMatchObject({ tokenExpiresAtMs: record.expiresAt });
    // The background refresh's index item, in the same transaction.
    expect(items[2]?.Put?.Item).toEqual({
      ...expiryKey(record.expiresAt as number),
      type: "appAccountExpiry",
      id: "apn_1",
    });
  });

  it("moves the expiry index item in the update's transaction when the expiry changes, and reads the index to list", async () => {
    ddb.on(GetCommand).resolves({ Item: storedItem });
    ddb.on(TransactWriteCommand).resolves({});
    const renewed = { ...record, expiresAt: 1_790_000_360_000, version: 4 };
    await expect(deps.appAccounts.update(renewed, 3)).resolves.toBe(true);
    expect(ddb.commandCalls(GetCommand)[0]?.args[0].input).toMatchObject({
      Key: { pk: "ACCT#apn_1", sk: "ACCT" },
      ConsistentRead: true,
    });
    const [, , removed, added] = ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems ?? [];
    expect(removed?.Delete).toEqual({ TableName: TABLE, Key: expiryKey(record.expiresAt as number) });
    expect(added?.Put).toEqual({
      TableName: TABLE,
      Item: { ...expiryKey(renewed.expiresAt), type: "appAccountExpiry", id: "apn_1" },
    });
    // Another version stored: a lost race found by the read, nothing written.
    ddb.on(GetCommand).resolves({ Item: { ...storedItem, version: 5 } });
    await expect(deps.appAccounts.update(renewed, 3)).resolves.toBe(false);
    expect(ddb.commandCalls(TransactWriteCommand)).toHaveLength(1);

    ddb.on(QueryCommand).resolves({ Items: [{ ...expiryKey(record.expiresAt as number), id: "apn_1" }] });
    ddb.on(GetCommand).resolves({ Item: storedItem });
    await expect(deps.appAccounts.listExpiring(1_790_000_000_001, 25)).resolves.toEqual([record]);
    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      KeyConditionExpression: "pk = :pk AND sk < :before",
      ExpressionAttributeValues: { ":pk": "ACCTEXPIRY", ":before": "001790000000001" },
      ConsistentRead: true,
      Limit: 25,
    });
  });

  it("updates on the expected version of the account's item, and a failed condition is a lost race (false)", async () => {
    ddb.on(GetCommand).resolves({ Item: storedItem });
    ddb.on(TransactWriteCommand).rejects(
      new TransactionCanceledException({
        message: "cancelled",
        $metadata: {},
        CancellationReasons: [{ Code: "ConditionalCheckFailed" }, { Code: "None" }],
      }),
    );
    await expect(deps.appAccounts.update({ ...record, version: 4 }, 3)).resolves.toBe(false);
    const [main, copy] = ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems ?? [];
    expect(main?.Put).toMatchObject({
      Item: { pk: "ACCT#apn_1", sk: "ACCT", version: 4 },
      ConditionExpression: "version = :expected",
      ExpressionAttributeValues: { ":expected": 3 },
    });
    expect(copy?.Put?.Item).toMatchObject({ pk: "WS#o_1", sk: "ACCT#apn_1" });
    ddb.on(TransactWriteCommand).rejects(new Error("throttled"));
    await expect(deps.appAccounts.update({ ...record, version: 4 }, 3)).rejects.toThrow("throttled");
  });

  it("stores an OAuth state with the table's TTL in epoch seconds, and takes it with one DeleteItem", async () => {
    ddb.on(PutCommand).resolves({});
    const pending = {
      state: "st",
      workspaceId: "o_1",
      ownerId: "u_1",
      app: "github",
      sealedVerifier: "kms1.v",
      redirectUri: "https://x/cb",
      expiresAt: 1_790_000_000_500,
    };
    await deps.appAccounts.savePendingConnect(pending, 0);
    expect(ddb.commandCalls(PutCommand)[0]?.args[0].input).toMatchObject({
      TableName: TABLE,
      Item: { pk: "OAUTHSTATE#st", sk: "STATE", expiresAtMs: pending.expiresAt, expiresAt: 1_790_000_001 },
      ConditionExpression: "attribute_not_exists(pk)",
    });
    ddb.on(DeleteCommand).resolves({ Attributes: ddb.commandCalls(PutCommand)[0]?.args[0].input.Item });
    await expect(deps.appAccounts.takePendingConnect("st", 0)).resolves.toEqual(pending);
    expect(ddb.commandCalls(DeleteCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "OAUTHSTATE#st", sk: "STATE" },
      ConditionExpression: "attribute_exists(pk)",
      ReturnValues: "ALL_OLD",
    });
    // A state another take got first: the condition fails, and this take gets nothing.
    ddb.on(DeleteCommand).rejects(Object.assign(new Error("gone"), { name: "ConditionalCheckFailedException" }));
    await expect(deps.appAccounts.takePendingConnect("st", 0)).resolves.toBeUndefined();
  });
});
