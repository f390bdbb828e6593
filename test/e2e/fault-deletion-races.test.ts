import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * Deletions racing the requests a busy client sends at the same time (decisions 508 to 513): on
 * one source (with a `deactivate` hook) and one workflow, at once, DELETEs twice, PUTs of props,
 * code, `active`, steps and triggers, events to their endpoints, and subscriptions naming them.
 * No answer is a 5xx or a 400 (each request is well formed: losing the race is 404, or 409 while
 * an update runs), the server logs no error, and nothing of the deleted resources is left: no
 * event, run or subscription in the data file, no folder of their code, no source deployed for a
 * deleted workflow. (Dead letters need eight failed attempts, an hour: unit tests cover them.)
 */
const ROUNDS = 8;

const SOURCE_CODE = (n: number) => `export default {
  name: "Raced",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: false }, label: { type: "string", optional: true } },
  hooks: { async deactivate() { await new Promise((resolve) => setTimeout(resolve, ${n % 3} * 10)); } },
  async run(event) { this.$emit({ n: ${n} }); },
};`;

const STEP_CODE = (n: number) => `export default defineComponent({
  async run({ steps, $ }) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    $.send.emit({ raw_event: ${n} });
    return ${n};
  },
});`;

describe("deletions racing other requests", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  }, 30_000);

  afterAll(async () => {
    await sluice?.stop();
  });

  it("answers 2xx, 404 or 409 only, logs no error, and leaves nothing of what it deleted", async () => {
    const webhook = (await api("POST", `/webhooks?url=${encodeURIComponent("https://example.com/raced")}`)).json.data;
    const deleted: string[] = [];
    const answers: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const source = (await api("POST", "/sources", { component_code: SOURCE_CODE(round), name: `raced ${round}` }))
        .json.data;
      const workflow = (
        await api("POST", "/workflows", {
          settings: { name: `raced ${round}`, auto_deploy: true },
          steps: [{ namespace: "step", component_code: STEP_CODE(round) }],
          triggers: [{ type: "http", props: {} }],
        })
      ).json.data;
      deleted.push(source.id, workflow.id);
      const sourceUrl: string = source.configured_props.http.endpoint_url;
      const workflowUrl: string = workflow.triggers[0].endpoint_url;
      const subscribe = (emitter: string, listener: string, name: string) =>
        api("POST", `/subscriptions?emitter_id=${emitter}&listener_id=${listener}&event_name=${name}`);
      const requests: [string, () => Promise<{ status: number }>][] = [
        ["DELETE source", () => api("DELETE", `/sources/${source.id}`)],
        ["DELETE source", () => api("DELETE", `/sources/${source.id}`)],
        ["PUT source props", () => api("PUT", `/sources/${source.id}`, { configured_props: { label: "x" } })],
        ["PUT source active", () => api("PUT", `/sources/${source.id}`, { active: false })],
        ["PUT source code", () => api("PUT", `/sources/${source.id}`, { component_code: SOURCE_CODE(round + 100) })],
        ["DELETE workflow", () => api("DELETE", `/workflows/${workflow.id}`)],
        ["DELETE workflow", () => api("DELETE", `/workflows/${workflow.id}`)],
        [
          "PUT workflow steps",
          () =>
            api("PUT", `/workflows/${workflow.id}`, {
              steps: [{ namespace: "step", component_code: STEP_CODE(round + 100) }],
            }),
        ],
        ["PUT workflow active", () => api("PUT", `/workflows/${workflow.id}`, { active: true })],
        [
          "PUT workflow triggers",
          () =>
            api("PUT", `/workflows/${workflow.id}`, {
              triggers: [{ type: "source", props: { component_code: SOURCE_CODE(round + 200) } }],
            }),
        ],
      ];
      for (let i = 0; i < 6; i++) {
        requests.push(["source event", () => fetch(sourceUrl, { method: "POST", body: `{"i":${i}}` })]);
        requests.push(["workflow event", () => fetch(workflowUrl, { method: "POST", body: `{"i":${i}}` })]);
        requests.push(["subscription", () => subscribe(source.id, webhook.id, `c${i}`)]);
        requests.push(["subscription", () => subscribe(workflow.id, source.id, `d${i}`)]);
      }
      // Spread over about 60 ms, so that some land in each step of the deletions.
      const settled = await Promise.all(
        requests.map(([label, send], index) =>
          new Promise((resolve) => setTimeout(resolve, (index * 7) % 60)).then(
            async () => `${label} ${(await send()).status}`,
          ),
        ),
      );
      answers.push(...settled);
    }

    const unexpected = answers.filter((answer) => !/ (200|202|404|409)$/.test(answer));
    expect(unexpected).toEqual([]);
    // Which requests meet a deletion under way depends on timing, so none is required to: on the
    // code before decisions 508-510 this test failed in every run (DELETEs answered 400).

    // What runs under way stored lands within a moment of their end.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(
      sluice
        .output()
        .split("\n")
        .filter((line) => line.includes('"level":"error"')),
    ).toEqual([]);
    for (const id of deleted)
      expect((await api("GET", `/${id.startsWith("p_") ? "workflows" : "sources"}/${id}`)).status).toBe(404);
    const subscriptions = (await api("GET", "/users/me/subscriptions?limit=100")).json.data;
    expect(subscriptions).toEqual([]);
    // Nor a source a PUT of triggers deployed for a workflow deleted meanwhile.
    expect((await api("GET", "/users/me/sources?limit=100")).json.data).toEqual([]);
    const db = new Database(join(sluice.dataDir, "sluice.db"), { readonly: true, fileMustExist: true });
    try {
      const count = (sql: string) =>
        deleted.reduce((sum, id) => sum + (db.prepare(sql).get({ id }) as { n: number }).n, 0);
      expect(count("SELECT count(*) AS n FROM events WHERE source_id = @id")).toBe(0);
      expect(count("SELECT count(*) AS n FROM workflow_runs WHERE workflow_id = @id")).toBe(0);
      expect(count("SELECT count(*) AS n FROM subscriptions WHERE emitter_id = @id OR listener_id = @id")).toBe(0);
    } finally {
      db.close();
    }
    for (const dir of ["sources", "workflows"]) {
      const folder = join(sluice.dataDir, "sandbox", dir);
      const left = existsSync(folder) ? readdirSync(folder) : [];
      expect(left.filter((name) => deleted.includes(name))).toEqual([]);
    }
  }, 60_000);
});
