import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { documentClient } from "#adapters/aws/composition";
import { DynamoDbIdentityStore } from "#adapters/aws/dynamodb-identity-store";
import { authenticate } from "#core/accounts";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { REPO_ROOT } from "../support/local-process.ts";

const run = promisify(execFile);

describe("sluice create-user against a deployed stack's table (DynamoDB Local here)", () => {
  const endpoint = inject("dynamodbEndpoint");
  const table = `cli-${process.pid}`;
  const target = ["--table", table, "--region", "local", "--endpoint", endpoint];
  const env = { ...process.env, AWS_ACCESS_KEY_ID: "local", AWS_SECRET_ACCESS_KEY: "local" };
  const cli = (...args: string[]) =>
    run(process.execPath, ["--import", "tsx", "bin/sluice.ts", "create-user", ...args], { cwd: REPO_ROOT, env });

  beforeAll(async () => {
    await createResourcesTable(endpoint, table);
  });

  it("creates a user whose printed key authenticates against the table", async () => {
    const { stdout } = await cli(...target, "--username", "alice", "--email", "alice@example.com");
    const created = JSON.parse(stdout);
    expect(created).toEqual({
      user_id: expect.stringMatching(/^u_/),
      workspace_id: expect.stringMatching(/^o_/),
      project_id: expect.stringMatching(/^proj_/),
      api_key: expect.stringMatching(/^sluice_/),
    });
    const client = localDynamoDbClient(endpoint);
    const identity = new DynamoDbIdentityStore(documentClient(client), table);
    expect(await authenticate({ identity }, `Bearer ${created.api_key}`)).toEqual({ userId: created.user_id });
    client.destroy();
  });

  it("fails with a clear message when required options are missing or the username is taken", async () => {
    await expect(cli("--table", table)).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining("missing --username, --email"),
    });
    await expect(cli(...target, "--username", "alice", "--email", "a@example.com")).rejects.toMatchObject({
      stderr: expect.stringContaining("username alice is taken"),
    });
  });
});
