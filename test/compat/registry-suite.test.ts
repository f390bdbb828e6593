import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { REPO_ROOT, type SluiceProcess, startSluice } from "../support/local-process.ts";
import { postJson as post, registrySuite, stepSummaries as summaries, VIAS } from "../support/registry-suite.ts";
import { packageComponentFiles, REGISTRY_TREE, startTreeServer, type TreeServer } from "../support/registry-tree.ts";
import { type StandInApi, startStandInApi } from "../support/stand-in-api.ts";

/**
 * Issue 15, "Done when": a suite of components written afresh in the public registry's layout
 * and idioms (test/fixtures/registry-tree/components/: http_hooks, tasks, feed_reader,
 * text_tools, flow_helpers; ESM, CommonJS and TypeScript, app files, `common/` bases,
 * `@pipedream/platform`), each deployed both by `component_files` and by `component_url` from a
 * loopback file server, and seen to run as it intends against `npm start`: HTTP sources' events
 * and custom responses, dedupe and `this.db` state across requests, and actions' return values,
 * `$summary` and exports in workflows (the tasks and feed actions calling a stand-in API on
 * 127.0.0.1, test/support/stand-in-api.ts). Real actions of the installed
 * `@pipedream/helper_functions` package run unchanged as workflow steps.
 *
 * The polling sources are in registry-suite-polling.test.ts; components that need features other
 * branches are building (data stores, http_request props, delayed emits, sources without run) in
 * registry-suite-pending.test.ts.
 *
 * The tests run at once: each deploys its own sources and workflows (on its own tenant of the
 * stand-in API, its own data store), and most of their time is waiting for runs.
 */

const HELPER_FUNCTIONS = `${REPO_ROOT}node_modules/@pipedream/helper_functions`;

describe.concurrent("the registry suite: real-shaped components against local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let tree: TreeServer;
  let stand: StandInApi;

  const { componentFields, deploy, eventsWhen, stepOf, runWorkflow } = registrySuite(() => ({
    api,
    tree,
  }));

  beforeAll(async () => {
    [sluice, tree, stand] = await Promise.all([
      // No npm registry: everything the suite's components import ships with Sluice.
      startSluice({
        env: { SLUICE_REGISTRY_DIR: `${REGISTRY_TREE}components`, SLUICE_NPM_REGISTRY: "http://127.0.0.1:9/" },
      }),
      startTreeServer(),
      startStandInApi(),
    ]);
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await Promise.all([sluice?.stop(), tree?.close(), stand?.close()]);
  });

  for (const via of VIAS) {
    describe(`sources deployed by ${via}`, () => {
      it("http_hooks/new-requests answers with its configured response and emits the full request, or its body only", async () => {
        const source = await deploy(via, "http_hooks/sources/new-requests/new-requests.mjs", {
          resStatusCode: "201",
          resContentType: "text/plain",
          resBody: "thanks",
        });
        const answer = await post(`${source.endpoint}/orders?channel=web`, { order: 7 });
        expect(answer.status).toBe(201);
        expect(answer.headers.get("content-type")).toBe("text/plain");
        expect(await answer.text()).toBe("thanks");
        const [emitted] = await eventsWhen(source.id, 1, "the request");
        expect(emitted?.event).toMatchObject({
          method: "POST",
          path: "/orders",
          query: { channel: "web" },
          body: { order: 7 },
        });
        expect(emitted?.metadata.summary).toBe("POST /orders");

        // Defaults of the app's propDefinitions, and the body only.
        const bodyOnly = await deploy(via, "http_hooks/sources/new-requests/new-requests.mjs", { emitBodyOnly: true });
        const defaults = await post(`${bodyOnly.endpoint}`, { only: "body" });
        expect(defaults.status).toBe(200);
        expect(defaults.headers.get("content-type")).toBe("application/json");
        expect(await defaults.json()).toEqual({ success: true });
        const [body] = await eventsWhen(bodyOnly.id, 1, "the body");
        expect(body?.event).toEqual({ only: "body" });
      });

      it("http_hooks/new-requests-payload-only emits the body behind the default response", async () => {
        const answer = await api("POST", "/sources", {
          ...componentFields(via, "http_hooks/sources/new-requests-payload-only/new-requests-payload-only.mjs"),
        });
        expect(answer.status, JSON.stringify(answer.json)).toBe(200);
        const { id, configured_props } = answer.json.data;
        const response = await post(`${configured_props.http.endpoint_url}/in`, { payload: [1, 2] });
        expect(response.status).toBe(200);
        const [emitted] = await eventsWhen(id, 1, "the payload");
        expect(emitted?.event).toEqual({ payload: [1, 2] });
        expect(emitted?.metadata.summary).toBe("POST /in");
      });

      it("http_hooks/filtered-requests answers 204 to what its filters drop and emits only what they keep", async () => {
        const source = await deploy(via, "http_hooks/sources/filtered-requests/filtered-requests.mjs", {
          methods: ["POST", "PUT"],
          pathPrefix: "/hooks",
        });
        expect((await fetch(`${source.endpoint}/hooks/a`)).status).toBe(204);
        expect((await post(`${source.endpoint}/elsewhere`, {})).status).toBe(204);
        const kept = await post(`${source.endpoint}/hooks/b?x=1`, { kept: true });
        expect(kept.status).toBe(202);
        expect(await kept.json()).toEqual({ accepted: true });
        const emitted = await eventsWhen(source.id, 1, "the kept request");
        expect(emitted.map((e) => e.event)).toEqual([
          { method: "POST", path: "/hooks/b", query: { x: "1" }, body: { kept: true } },
        ]);
      });

      it("http_hooks/new-unique-requests emits a redelivered request once (unique dedupe) and refuses one without id", async () => {
        const source = await deploy(via, "http_hooks/sources/new-unique-requests/new-unique-requests.mjs");
        const url = source.endpoint as string;
        expect((await post(url, { n: 1 }, { "x-delivery-id": "d-1" })).status).toBe(200);
        expect(await (await post(url, { n: 1 }, { "x-delivery-id": "d-1" })).json()).toEqual({ received: "d-1" });
        expect((await post(url, { id: "d-2", n: 2 })).status).toBe(200);
        const refused = await post(url, { n: 3 });
        expect(refused.status).toBe(400);
        expect(await refused.json()).toEqual({ error: "X-Delivery-Id header or body id required" });
        expect((await post(url, { n: 4 }, { "x-delivery-id": "d-4" })).status).toBe(200);
        const emitted = await eventsWhen(source.id, 3, "the unique deliveries");
        expect(emitted.map((e) => e.metadata.summary)).toEqual(["Delivery d-1", "Delivery d-2", "Delivery d-4"]);
        expect(emitted.map((e) => e.event.n)).toEqual([1, 2, 4]);
      });

      it("http_hooks/request-counter keeps its count in this.db from its deploy hook across requests", async () => {
        const source = await deploy(via, "http_hooks/sources/request-counter/request-counter.mjs", { startAt: 40 });
        const answers: { count: number; since: string }[] = [];
        for (const path of ["/a", "/b", "/c"]) {
          answers.push(
            (await (await post(`${source.endpoint}${path}`, {})).json()) as { count: number; since: string },
          );
        }
        expect(answers.map((a) => a.count)).toEqual([41, 42, 43]);
        // The deploy hook's timestamp, read back from the db by every run.
        expect(new Set(answers.map((a) => a.since)).size).toBe(1);
        expect(Number.isNaN(Date.parse(answers[0]?.since ?? ""))).toBe(false);
        const emitted = await eventsWhen(source.id, 3, "the counted requests");
        expect(emitted.map((e) => e.event)).toEqual([
          { count: 41, path: "/a" },
          { count: 42, path: "/b" },
          { count: 43, path: "/c" },
        ]);
        expect(emitted.map((e) => e.metadata.summary)).toEqual(["Request #41", "Request #42", "Request #43"]);
      });

      it("http_hooks/requests-to-data-store counts per path in a named data store the action then reads", async () => {
        const store = { name: `suite-${via}` };
        const source = await deploy(via, "http_hooks/sources/requests-to-data-store/requests-to-data-store.mjs", {
          dataStore: store,
        });
        const counts = [];
        for (const path of ["/a", "/b", "/a"]) counts.push(await (await post(`${source.endpoint}${path}`, {})).json());
        expect(counts).toEqual([
          { count: 1, paths: 1 },
          { count: 1, paths: 2 },
          { count: 2, paths: 2 },
        ]);
        await eventsWhen(source.id, 3, "the counted requests");

        const { run, steps } = await runWorkflow([
          await stepOf(via, "remember", "flow_helpers/actions/remember-value/remember-value.mjs", {
            dataStore: store,
            key: "note",
            value: '{"kept": true}',
            ttl: 3600,
          }),
        ]);
        expect(run.status, JSON.stringify(run.error)).toBe("success");
        expect(Object.fromEntries(steps?.remember.$return_value)).toEqual({
          "path:/a": 2,
          "path:/b": 1,
          note: { kept: true },
        });
        expect(steps?.remember.$summary).toBe("Added note");
      });
    });
  }

  for (const via of VIAS) {
    describe(`actions as workflow steps, brought by ${via}`, () => {
      it("text_tools: eight formatting actions return their results with a $summary", async () => {
        const input = "  hello world.  this is   sluice. ";
        const { run, steps } = await runWorkflow([
          await stepOf(via, "capitalize", "text_tools/actions/capitalize-sentence/capitalize-sentence.mjs", {
            input: "first one. second one! third?",
          }),
          await stepOf(via, "trim", "text_tools/actions/trim-whitespace/trim-whitespace.mjs", { input }),
          await stepOf(via, "split_all", "text_tools/actions/split-text/split-text.mjs", {
            input: "a,b,c",
            separator: ",",
          }),
          await stepOf(via, "split_last", "text_tools/actions/split-text/split-text.mjs", {
            input: "a,b,c",
            separator: ",",
            segmentIndex: -1,
          }),
          await stepOf(via, "replace", "text_tools/actions/replace-text/replace-text.mjs", {
            input: "Order 12 and order 34",
            findText: "/\\d+/g",
            replaceText: "#",
          }),
          await stepOf(via, "encode", "text_tools/actions/url-encode-decode/url-encode-decode.mjs", {
            input: "a b&c=d",
          }),
          await stepOf(via, "emails", "text_tools/actions/extract-email-address/extract-email-address.mjs", {
            input: "Write to Ann@Example.com or bob@example.org; again ann@example.com.",
          }),
          await stepOf(via, "json", "text_tools/actions/convert-json-to-string/convert-json-to-string.mjs", {
            input: { b: [1, 2], a: "x" },
          }),
          await stepOf(via, "number", "text_tools/actions/format-number/format-number.mjs", {
            input: "1234567.891",
            toFormat: ",",
          }),
        ]);
        expect(run.status, JSON.stringify(run.error)).toBe("success");
        const values = Object.fromEntries(Object.entries(steps ?? {}).map(([k, v]) => [k, v?.$return_value]));
        expect(values).toMatchObject({
          capitalize: "First one. Second one! Third?",
          trim: "hello world. this is sluice.",
          split_all: ["a", "b", "c"],
          split_last: "c",
          replace: "Order # and order #",
          encode: "a%20b%26c%3Dd",
          emails: ["ann@example.com", "bob@example.org"],
          json: '{"b":[1,2],"a":"x"}',
          number: "1.234.567,891",
        });
        expect(summaries(run)).toMatchObject({
          capitalize: "Successfully capitalized text",
          split_all: "Successfully split text into 3 segments",
          replace: "Successfully replaced 2 matches",
          emails: "Successfully found 2 email addresses",
        });
        expect(steps?.number.$summary).toBe("Successfully formatted number");

        // A ConfigurationError of an action ends the run with its code.
        const bad = await runWorkflow([
          await stepOf(via, "number", "text_tools/actions/format-number/format-number.mjs", {
            input: "twelve",
            toFormat: ".",
          }),
        ]);
        expect(bad.run.status).toBe("error");
        expect(bad.run.error).toMatchObject({ code: "ConfigurationError" });
        expect(bad.run.error?.message).toContain('"twelve" is not a number');
      });

      it("flow_helpers: helper actions (one CommonJS) return values and exports later steps read", async () => {
        const { run, steps } = await runWorkflow([
          await stepOf(via, "pick", "flow_helpers/actions/pick-fields/pick-fields.mjs", {
            object: { user: { name: "Ann", age: 40 }, id: 7 },
            fields: ["user.name", "id", "missing"],
          }),
          await stepOf(via, "sum", "flow_helpers/actions/sum-numbers/sum-numbers.js", {
            numbers: ["1", "2.5", "x", "-0.5"],
          }),
          await stepOf(via, "compare", "flow_helpers/actions/compare-values/compare-values.mjs", {
            value1: "10",
            operator: "greater than",
            value2: "9",
          }),
          await stepOf(via, "random", "flow_helpers/actions/random-integer/random-integer.mjs", { min: 5, max: 6 }),
          await stepOf(via, "vars", "flow_helpers/actions/export-values/export-values.mjs", {
            values: { name: "ann", list: "[1, 2]" },
          }),
        ]);
        expect(run.status, JSON.stringify(run.error)).toBe("success");
        expect(steps?.pick.$return_value).toEqual({ "user.name": "Ann", id: 7 });
        expect(steps?.sum).toMatchObject({ $return_value: 3, skipped: ["x"], $summary: "Sum of 3 numbers" });
        expect(steps?.compare.$return_value).toBe(true);
        expect([5, 6]).toContain(steps?.random.$return_value);
        expect(steps?.vars).toEqual({ name: "ann", list: [1, 2], $summary: "Exported 2 values" });
        expect(summaries(run)).toMatchObject({ pick: "Picked 2 of 3 fields", compare: "10 greater than 9: true" });
      });

      it("tasks: actions call the stand-in API through their app's axios methods", async () => {
        const tenant = `actions-${via}`;
        stand.addTasks(tenant, "existing");
        const apiUrl = stand.baseUrl(tenant);
        const { run, steps } = await runWorkflow([
          await stepOf(via, "create", "tasks/actions/create-task/create-task.mjs", { apiUrl, title: "from a step" }),
          await stepOf(via, "complete", "tasks/actions/complete-task/complete-task.mjs", { apiUrl, taskId: 1 }),
          await stepOf(via, "list", "tasks/actions/list-tasks/list-tasks.mjs", { apiUrl }),
        ]);
        expect(run.status, JSON.stringify(run.error)).toBe("success");
        expect(steps?.create).toMatchObject({
          $return_value: { id: 2, title: "from a step", completed: false },
          $summary: "Successfully created task with ID 2",
        });
        expect(steps?.complete.$summary).toBe('Completed task "existing"');
        expect(steps?.list.$return_value.map((t: { id: number; completed: boolean }) => [t.id, t.completed])).toEqual([
          [2, false],
          [1, true],
        ]);
        expect(stand.tenant(tenant).tasks.map((t) => t.completed)).toEqual([true, false]);

        const again = await runWorkflow([
          await stepOf(via, "complete", "tasks/actions/complete-task/complete-task.mjs", { apiUrl, taskId: 1 }),
        ]);
        expect(again.run.error).toMatchObject({ code: "ConfigurationError", message: "Task 1 is already completed" });
      });

      it("feed_reader/merge-feeds (TypeScript defineAction) returns the feeds' items merged, newest first", async () => {
        const tenant = `merge-${via}`;
        const item = (guid: string, day: number) => ({
          guid,
          title: guid.toUpperCase(),
          link: `https://x/${guid}`,
          pubdate: `2026-05-0${day}T00:00:00Z`,
        });
        stand.tenant(tenant).feeds.one = [item("x", 1), item("y", 3)];
        stand.tenant(tenant).feeds.two = [item("y", 3), item("z", 2)];
        const { run, steps } = await runWorkflow([
          await stepOf(via, "merge", "feed_reader/actions/merge-feeds/merge-feeds.ts", {
            urls: [`${stand.baseUrl(tenant)}/feeds/one.json`, `${stand.baseUrl(tenant)}/feeds/two.json`],
          }),
        ]);
        expect(run.status, JSON.stringify(run.error)).toBe("success");
        expect(steps?.merge.$return_value.map((i: { guid: string }) => i.guid)).toEqual(["y", "z", "x"]);
        expect(steps?.merge.$summary).toBe("Merged 2 feeds into 3 items");
      });

      it("http_hooks/return-http-response answers the workflow's trigger with its props", async () => {
        const { answer, run, steps } = await runWorkflow(
          [
            await stepOf(via, "respond", "http_hooks/actions/return-http-response/return-http-response.mjs", {
              resStatusCode: "418",
              resContentType: "text/plain",
              resBody: "short and stout",
            }),
          ],
          { customResponse: true },
        );
        expect(answer.status).toBe(418);
        expect(answer.headers.get("content-type")).toBe("text/plain");
        expect(await answer.text()).toBe("short and stout");
        expect(run.status).toBe("success");
        expect(steps?.respond).toEqual({ $return_value: { status: 418 }, $summary: "Responded with status 418" });
      });
    });
  }

  describe("actions of the installed @pipedream/helper_functions package, unchanged", () => {
    const step = (namespace: string, action: string, props: Record<string, unknown>) => ({
      namespace,
      component_files: packageComponentFiles(HELPER_FUNCTIONS, `actions/${action}/${action}.mjs`),
      component_entry: `actions/${action}/${action}.mjs`,
      props,
    });

    it("run as steps: decode, compare, pick, export and stringify", async () => {
      const { run, steps } = await runWorkflow([
        step("decode", "base64-decode-string", { data: Buffer.from("héllo sluice").toString("base64") }),
        step("diff", "compare-arrays", { array1: ["a", "b", "c"], array2: ["b"], actionType: "difference" }),
        step("union", "compare-arrays", { array1: ["a"], array2: ["b", "a"], actionType: "union" }),
        step("pick", "random-item-from-list", { list: ["only", "two"], quantity: 2 }),
        step("vars", "export-variables", { config: { region: "eu", n: 3 } }),
        step("json", "convert-object-to-json-string", { object: "plain text" }),
      ]);
      expect(run.status, JSON.stringify(run.error)).toBe("success");
      expect(steps?.decode).toEqual({ data: "héllo sluice" });
      expect(steps?.diff.$return_value).toEqual(["a", "c"]);
      expect(steps?.union.$return_value).toEqual(["a", "b"]);
      expect([...(steps?.pick.$return_value ?? [])].sort()).toEqual(["only", "two"]);
      expect(steps?.vars).toEqual({ config: { region: "eu", n: 3 } });
      expect(steps?.json.$return_value).toBe('"plain text"');
    });

    it("fail with the platform's ConfigurationError where the action throws one", async () => {
      const { run } = await runWorkflow([step("pick", "random-item-from-list", { list: ["one"], quantity: 2 })]);
      expect(run.status).toBe("error");
      expect(run.error).toMatchObject({
        code: "ConfigurationError",
        message: "Quantity must be smaller than the list size",
      });
    });
  });

  it("deploys the fixture tree's components by registry key", async () => {
    const registry = await api("GET", "/components/registry/http_hooks-request-counter");
    expect(registry.status).toBe(200);
    const deployed = await api("POST", "/sources", {
      key: "http_hooks-request-counter",
      configured_props: { startAt: 1 },
    });
    expect(deployed.status, JSON.stringify(deployed.json)).toBe(200);
    const url = deployed.json.data.configured_props.httpInterface.endpoint_url;
    expect(await (await post(url, {})).json()).toMatchObject({ count: 2 });
    // The same component brought by files is the same code.
    const byFiles = await api("POST", "/components", {
      ...componentFields("component_files", "http_hooks/sources/request-counter/request-counter.mjs"),
    });
    expect(byFiles.status).toBe(200);
  });
});
