import { readdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbIdentityStore } from "#adapters/aws/dynamodb-identity-store";
import { authenticate } from "#core/accounts";
import { DATABASE_FILE } from "#local-mode/composition";
import { apiClient } from "../support/api-client.ts";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { newDataDir, runSluice, type SluiceProcess, startSluice } from "../support/local-process.ts";

describe("sluice create-user against a deployed stack's table (DynamoDB Local here)", () => {
  const endpoint = inject("dynamodbEndpoint");
  const table = `cli-${process.pid}`;
  const target = ["--table", table, "--region", "local", "--endpoint", endpoint];
  const cli = (...args: string[]) =>
    runSluice(["create-user", ...args], { AWS_ACCESS_KEY_ID: "local", AWS_SECRET_ACCESS_KEY: "local" });

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

describe("sluice create-user in local mode (no --table)", () => {
  let sluice: SluiceProcess;
  const cli = (dataDir: string, ...args: string[]) => runSluice(["create-user", ...args], { SLUICE_DATA_DIR: dataDir });

  beforeAll(async () => {
    sluice = await startSluice();
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("creates a user with their own workspace and project while the server runs; the key works at once", async () => {
    const key = "bob-key-0123456789abcdef";
    const { stdout } = await cli(sluice.dataDir, "--username", "bob", "--email", "bob@example.com", "--key", key);
    const created = JSON.parse(stdout);
    expect(created).toEqual({
      user_id: expect.stringMatching(/^u_/),
      workspace_id: expect.stringMatching(/^o_/),
      project_id: expect.stringMatching(/^proj_/),
      api_key: key,
    });
    const bob = apiClient(sluice.baseUrl, created.api_key);
    const me = await bob("GET", "/users/me");
    expect(me.status).toBe(200);
    expect(me.json.data).toMatchObject({ id: created.user_id, username: "bob", email: "bob@example.com" });
    expect(me.json.data.orgs.map((org: { id: string }) => org.id)).toEqual([created.workspace_id]);
    const projects = await bob("GET", `/workspaces/${created.workspace_id}/projects`);
    expect(projects.json.data.map((project: { id: string }) => project.id)).toEqual([created.project_id]);

    // A generated key is printed and works too; the first user's key file is left alone.
    const firstKey = sluice.apiKeyFromFile();
    const generated = JSON.parse((await cli(sluice.dataDir, "--username", "carol", "--email", "c@example.com")).stdout);
    expect(generated.api_key).toMatch(/^sluice_/);
    expect((await apiClient(sluice.baseUrl, generated.api_key)("GET", "/users/me")).json.data.username).toBe("carol");
    expect(sluice.apiKeyFromFile()).toBe(firstKey);
    const first = await apiClient(sluice.baseUrl, firstKey)("GET", "/users/me");
    expect(first.json.data.orgs.map((org: { id: string }) => org.id)).not.toContain(created.workspace_id);
  });

  it("refuses a taken username, missing options, AWS-only options and a data dir without data", async () => {
    const empty = newDataDir();
    // Each call is its own process: run them side by side. "sluice" is the first user local mode made.
    const refusals: Array<[string[], string, string]> = [
      [["--username", "sluice", "--email", "x@example.com"], sluice.dataDir, "username sluice is taken"],
      [["--username", "bob", "--email", "x@example.com"], sluice.dataDir, "username bob is taken"],
      [["--username", "dave"], sluice.dataDir, "missing --email"],
      [
        ["--username", "dave", "--email", "d@example.com", "--region", "eu-west-1"],
        sluice.dataDir,
        "--region only apply with --table",
      ],
      [["--username", "Dave", "--email", "d@example.com"], sluice.dataDir, "username: must be"],
      [["--username", "dave", "--email", "d@example.com"], empty, `no local data in ${empty}`],
    ];
    await Promise.all(
      refusals.map(([args, dataDir, message]) =>
        expect(cli(dataDir, ...args)).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining(message) }),
      ),
    );
    // Nothing was made by the refused calls.
    const bob = apiClient(sluice.baseUrl, "bob-key-0123456789abcdef");
    expect((await bob("GET", "/users/me")).json.data.orgs).toHaveLength(1);
  });
});

describe("sluice create-key", () => {
  it("does none of the server's background work: a queued run stays queued for the server", async () => {
    // A data dir whose server stopped with one run still queued (as after a kill mid-ingest).
    const stopped = await startSluice();
    await stopped.stop();
    const file = join(stopped.dataDir, DATABASE_FILE);
    const queuedRuns = () => {
      const db = new Database(file, { readonly: true, fileMustExist: true });
      try {
        return db.prepare<[], { job: string }>("SELECT job FROM run_jobs").all();
      } finally {
        db.close();
      }
    };
    const job = JSON.stringify({ sourceId: "dc_01jd0000000000000000ab", trigger: "http", event: { n: 1 } });
    const db = new Database(file);
    db.prepare("INSERT INTO run_jobs (job) VALUES (?)").run(job);
    db.close();

    const { stdout } = await runSluice(["create-key"], { SLUICE_DATA_DIR: stopped.dataDir });
    expect(stdout).toMatch(/^sluice_\S+\n\(saved to /);
    // The next server runs it; create-key, which may run beside a live server, must not.
    expect(queuedRuns()).toEqual([{ job }]);
  });

  it("refuses a data dir with no data, and makes nothing there", async () => {
    const empty = newDataDir();
    await expect(runSluice(["create-key"], { SLUICE_DATA_DIR: empty })).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining(`no local data in ${empty}`),
    });
    expect(readdirSync(empty)).toEqual([]);
  });
});
