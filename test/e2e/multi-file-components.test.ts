import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { route as createComponent } from "#http/create-component";
import { apiClient } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { appFiles, REGISTRY_TREE, startTreeServer, type TreeServer } from "../support/registry-tree.ts";

/**
 * Issue 15, "Bringing a component": sources written in the public registry's layout
 * (test/fixtures/registry-tree/: an app file, `sources/<name>/<name>.mjs`, `common/` folders,
 * relative imports between them) deployed over real HTTP against `npm start`, by
 * `component_files` and by `component_url`, and seen to run.
 */
describe("multi-file components against local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let tree: TreeServer;
  let elsewhere: TreeServer;

  beforeAll(async () => {
    sluice = await startSluice({ env: { SLUICE_REGISTRY_DIR: REGISTRY_TREE } });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    elsewhere = await startTreeServer();
    tree = await startTreeServer({
      "/components/hostile/sources/away/away.mjs":
        'import app from "../../hostile.app.mjs"; export default { name: "away", props: { app }, run() {} };',
      "/components/hostile/hostile.app.mjs": (response) => {
        response.writeHead(302, { location: `${elsewhere.origin}/components/webhooks/webhooks.app.mjs` });
        response.end();
      },
      "/components/hostile/sources/passwd/passwd.mjs":
        'import p from "../../../../etc/passwd"; export default { name: p, run() {} };',
    });
  });
  afterAll(async () => {
    await sluice?.stop();
    await tree?.close();
    await elsewhere?.close();
  });

  const events = async (sourceId: string) =>
    (await api("GET", `/sources/${sourceId}/event_summaries?expand=event`)).json.data as {
      event: any;
      metadata: { summary?: string };
    }[];

  it("deploys an ESM source with its app and common files by component_files; it answers and emits", async () => {
    const files = appFiles("webhooks");
    const deployed = await api("POST", "/sources", {
      component_files: files,
      component_entry: "sources/new-request/new-request.mjs",
      configured_props: { resStatusCode: "202" },
    });
    expect(deployed.status, JSON.stringify(deployed.json)).toBe(200);
    const source = deployed.json.data;
    expect(source.name_slug).toBe("new-request");
    const answer = await fetch(`${source.configured_props.http.endpoint_url}/hook`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ hello: "files" }),
    });
    expect(answer.status).toBe(202);
    expect(answer.headers.get("content-type")).toBe("application/json");
    expect(await answer.json()).toEqual({ count: 1 });
    const emitted = await eventually(async () => {
      const found = await events(source.id);
      return when(found.length === 1) && found;
    }, "the first event");
    expect(emitted[0]?.event).toEqual({ count: 1, body: { hello: "files" } });
    expect(emitted[0]?.metadata.summary).toBe("Request POST /hook");

    // The saved component shows the entry's code, its files and a hash over all of them.
    const component = await api("GET", `/components/${source.component_id}`);
    expect(createComponent.response.safeParse(component.json).error).toBeUndefined();
    expect(component.json.data.code).toBe(files["sources/new-request/new-request.mjs"]);
    expect(component.json.data.component_entry).toBe("sources/new-request/new-request.mjs");
    expect(component.json.data.component_files).toEqual(files);
    const changed = await api("POST", "/components", {
      component_files: { ...files, "common/constants.mjs": files["common/constants.mjs"]?.replace("Request", "Hit") },
      component_entry: "sources/new-request/new-request.mjs",
    });
    expect(changed.status).toBe(200);
    expect(changed.json.data.code).toBe(component.json.data.code);
    expect(changed.json.data.code_hash).not.toBe(component.json.data.code_hash);

    // PUT with other files: the new code runs.
    const updated = await api("PUT", `/sources/${source.id}`, {
      component_files: { ...files, "common/constants.mjs": files["common/constants.mjs"]?.replace("Request", "Hit") },
      component_entry: "sources/new-request/new-request.mjs",
    });
    expect(updated.status, JSON.stringify(updated.json)).toBe(200);
    await fetch(`${source.configured_props.http.endpoint_url}/again`, { method: "POST" });
    const after = await eventually(async () => {
      const found = await events(source.id);
      return when(found.length === 2) && found;
    }, "the event of the updated code");
    expect(after.map((e) => e.metadata.summary).sort()).toEqual(["Hit POST /again", "Request POST /hook"]);
  });

  it("deploys a TypeScript source using defineSource from @pipedream/types; its timer run emits", async () => {
    const deployed = await api("POST", "/sources", {
      component_files: appFiles("feeds"),
      component_entry: "sources/new-item/new-item.ts",
      configured_props: { timer: { intervalSeconds: 1 } },
    });
    expect(deployed.status, JSON.stringify(deployed.json)).toBe(200);
    const emitted = await eventually(async () => {
      const found = await events(deployed.json.data.id);
      return when(found.length >= 2) && found;
    }, "the timer's events");
    expect(emitted.map((e) => e.event.title).sort()).toEqual(["First item", "Second item"]);
  });

  it("answers 400 naming the importing file and the import that is missing or leads out", async () => {
    const files = appFiles("webhooks");
    delete files["common/constants.mjs"];
    const missing = await api("POST", "/sources", {
      component_files: files,
      component_entry: "sources/new-request/new-request.mjs",
    });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toContain(
      'webhooks.app.mjs: cannot import "./common/constants.mjs": no such file among the component\'s files',
    );
    const escaping = await api("POST", "/components", {
      component_files: { "sources/a/a.mjs": 'import p from "../../../../etc/passwd"; export default { name: p };' },
    });
    expect(escaping.status).toBe(400);
    expect(escaping.json.error).toContain('sources/a/a.mjs: cannot import "../../../../etc/passwd"');
    const absolute = await api("POST", "/components", {
      component_files: { "/etc/passwd.mjs": "export default {}", "a.mjs": "export default {}" },
      component_entry: "a.mjs",
    });
    expect(absolute.status).toBe(400);
    expect(absolute.json.error).toContain("must be a relative path");
  });

  it("deploys a registry-layout source by component_url, fetching its relative imports against the URL", async () => {
    const url = `${tree.origin}/components/webhooks/sources/new-request/new-request.mjs`;
    const deployed = await api("POST", "/sources", { component_url: url });
    expect(deployed.status, JSON.stringify(deployed.json)).toBe(200);
    const source = deployed.json.data;
    const answer = await fetch(source.configured_props.http.endpoint_url, { method: "POST", body: "{}" });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ count: 1 });
    const emitted = await eventually(async () => {
      const found = await events(source.id);
      return when(found.length === 1) && found;
    }, "the URL source's event");
    expect(emitted[0]?.metadata.summary).toBe("Request POST /");
    const component = (await api("GET", `/components/${source.component_id}`)).json.data;
    expect(component.component_url).toBe(url);
    expect(component.component_entry).toBe("webhooks/sources/new-request/new-request.mjs");
    expect(Object.keys(component.component_files).sort()).toEqual([
      "webhooks/common/constants.mjs",
      "webhooks/sources/common/base.mjs",
      "webhooks/sources/new-request/new-request.mjs",
      "webhooks/webhooks.app.mjs",
    ]);

    // A CommonJS tree by URL, run by its timer's first tick.
    const counter = await api("POST", "/sources", {
      component_url: `${tree.origin}/components/legacy_counter/sources/counter/counter.js`,
      configured_props: { timer: { intervalSeconds: 1 } },
    });
    expect(counter.status, JSON.stringify(counter.json)).toBe(200);
    const ticks = await eventually(async () => {
      const found = await events(counter.json.data.id);
      return when(found.length >= 1) && found;
    }, "the counter's first tick");
    expect(ticks.at(-1)?.event).toEqual({ n: 1, label: "TICK 1" });
  });

  it("refuses a URL tree whose import leads above its root or is redirected to another origin", async () => {
    elsewhere.requested.length = 0;
    const away = await api("POST", "/sources", {
      component_url: `${tree.origin}/components/hostile/sources/away/away.mjs`,
    });
    expect(away.status).toBe(400);
    expect(away.json.error).toMatch(/redirects to another origin/);
    expect(elsewhere.requested).toEqual([]);
    const passwd = await api("POST", "/components", {
      component_url: `${tree.origin}/components/hostile/sources/passwd/passwd.mjs`,
    });
    expect(passwd.status).toBe(400);
    expect(passwd.json.error).toContain(
      'cannot import "../../../../etc/passwd": it leads out of the component\'s files',
    );
  });

  it("takes component_files as a workflow step", async () => {
    const created = await api("POST", "/workflows", {
      settings: { name: "files step", auto_deploy: true },
      steps: [
        {
          namespace: "greet",
          component_files: {
            "actions/greet/greet.mjs":
              'import { greeting } from "../../common/words.mjs";\nexport default defineComponent({ async run({ $ }) { await $.respond({ status: 200, body: { said: greeting } }); } });',
            "common/words.mjs": 'export const greeting = "hello from a sibling file";',
          },
          component_entry: "actions/greet/greet.mjs",
        },
      ],
      triggers: [{ type: "http", props: { custom_response: true } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const step = created.json.data.steps[0];
    expect(step.savedComponent.entryPath).toBe("actions/greet/greet.mjs");
    expect(step.code_raw).toContain("defineComponent");
    const answer = await fetch(created.json.data.triggers[0].endpoint_url, { method: "POST" });
    expect(await answer.json()).toEqual({ said: "hello from a sibling file" });
  });

  it("deploys a workflow's source trigger from component_files, and the workflow runs on its events", async () => {
    const created = await api("POST", "/workflows", {
      settings: { name: "files trigger", auto_deploy: true },
      steps: [
        {
          namespace: "keep",
          component_code:
            "export default defineComponent({ async run({ steps, $ }) { $.export('count', steps.trigger.event.count); } });",
        },
      ],
      triggers: [
        {
          type: "source",
          props: { component_files: appFiles("webhooks"), component_entry: "sources/new-request/new-request.mjs" },
        },
      ],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const sourceId = created.json.data.triggers[0].id;
    const source = (await api("GET", `/sources/${sourceId}`)).json.data;
    const answer = await fetch(source.configured_props.http.endpoint_url, { method: "POST", body: "{}" });
    expect(await answer.json()).toEqual({ count: 1 });
    const runs = await eventually(async () => {
      const found = (await api("GET", `/workflows/${created.json.data.id}/runs`)).json.data;
      return when(Array.isArray(found) && found.length === 1 && found[0].status === "success") && found;
    }, "the workflow's run on the trigger's event");
    expect(runs[0].status).toBe("success");
  });

  it("serves a SLUICE_REGISTRY_DIR tree by key and deploys from it, one component per code hash", async () => {
    const served = await api("GET", "/components/registry/webhooks-new-request");
    expect(served.status, JSON.stringify(served.json)).toBe(200);
    expect(served.json.data.key).toBe("webhooks-new-request");
    expect(served.json.data.component_entry).toBe("webhooks/sources/new-request/new-request.mjs");
    expect(served.json.data.configurable_props.map((prop: { name: string }) => prop.name)).toContain("resContentType");
    const first = await api("POST", "/sources", {
      key: "webhooks-new-request",
      configured_props: { resStatusCode: "201" },
    });
    const second = await api("POST", "/sources", { key: "webhooks-new-request" });
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    expect(second.json.data.component_id).toBe(first.json.data.component_id);
    expect(first.json.data.component_id).toBe(served.json.data.id);
    const answer = await fetch(first.json.data.configured_props.http.endpoint_url, { method: "POST", body: "{}" });
    expect(answer.status).toBe(201);
    // The shipped registry is still served behind it.
    expect((await api("GET", "/components/registry/http-new-requests")).status).toBe(200);
    expect((await api("GET", "/components/registry/no-such-key")).status).toBe(404);
  });

  it("names each file by its path and line in the stack of a run's error", async () => {
    const deployed = await api("POST", "/sources", {
      component_files: {
        "sources/a/a.mjs":
          'import common from "../common/base.mjs";\nexport default { ...common, name: "a", version: "0.0.1", props: { http: "$.interface.http" }, async run() { this.boom(); } };',
        "sources/common/base.mjs":
          'export default {\n  methods: {\n    boom() {\n      throw new Error("boom in base");\n    },\n  },\n};',
      },
      component_entry: "sources/a/a.mjs",
    });
    expect(deployed.status, JSON.stringify(deployed.json)).toBe(200);
    await fetch(deployed.json.data.configured_props.http.endpoint_url, { method: "POST" });
    const errors = await eventually(async () => {
      const found = (
        await api("GET", `/sources/${deployed.json.data.id}/event_summaries?expand=event&event_name=$errors`)
      ).json.data;
      return when(found.length > 0) && found;
    }, "the run's error");
    expect(errors[0].event.error.message).toBe("boom in base");
    expect(errors[0].event.error.stack).toMatch(/at Object\.boom \(sources\/common\/base\.mjs:4:13\)/);
    expect(errors[0].event.error.stack).toMatch(/at Object\.run \(sources\/a\/a\.mjs:2:\d+\)/);
  });

  it("runs a registry directory's action as a workflow step by key, with its app and common files", async () => {
    const created = await api("POST", "/workflows", {
      settings: { name: "registry action", auto_deploy: true },
      steps: [{ namespace: "reply", key: "webhooks-send-response", props: { status: 202, message: "from the tree" } }],
      triggers: [{ type: "http", props: { custom_response: true } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    expect(created.json.data.steps[0].savedComponent.entryPath).toBe(
      "webhooks/actions/send-response/send-response.mjs",
    );
    const answer = await fetch(created.json.data.triggers[0].endpoint_url, { method: "POST" });
    expect(answer.status).toBe(202);
    expect(await answer.json()).toEqual({ message: "from the tree" });
  });

  it("refuses more than 200 files in component_files", async () => {
    const many = Object.fromEntries(Array.from({ length: 201 }, (_, i) => [`common/f${i}.mjs`, "export default 1;"]));
    const answer = await api("POST", "/components", {
      component_files: { ...many, "sources/a/a.mjs": "export default {}" },
      component_entry: "sources/a/a.mjs",
    });
    expect(answer.status).toBe(400);
    expect(answer.json.error).toContain("component_files: must hold at most 200 files");
  });
});
