import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ApiAnswer,
  apiClient,
  createHttpWorkflow,
  httpWorkflowBody,
  type WorkflowStepSpec,
} from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

/**
 * Actions written the way the public registry writes them (`components/*\/actions/*`, in
 * test/fixtures/actions/, each with its app module inlined: decision 24), run unchanged as
 * workflow steps through `npm start` and its real sandbox (docs/design/workflows.md §4). Each
 * fixture needs no third-party account: what is asserted is what a user of the registry action
 * would see, read back through the API.
 */
const fixture = (name: string) => readFileSync(new URL(`../fixtures/actions/${name}`, import.meta.url), "utf8");

const BUCKET = "sluice-compat-bucket";

/** A plain code step reading earlier steps, as a user would add after a registry action. */
const codeStep = (body: string) => `export default defineComponent({ async run({ steps, $ }) { ${body} } })`;

/** Emits what the earlier steps left, so a test reads it back from the workflow's events. */
const REPORT = codeStep(`$.send.emit({ raw_event: JSON.parse(JSON.stringify(steps)) });`);

/** A CSV file served on 127.0.0.1 at `/<name>` (404 elsewhere) while `body` runs, given its URL. */
async function withCsvServed(name: string, csv: string, body: (url: string) => Promise<void>): Promise<void> {
  const files = createServer((request, response) => {
    if (request.url === `/${name}`) response.writeHead(200, { "content-type": "text/csv" }).end(csv);
    else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => files.listen(0, "127.0.0.1", resolve));
  try {
    await body(`http://127.0.0.1:${(files.address() as AddressInfo).port}/${name}`);
  } finally {
    files.closeAllConnections();
    await new Promise((resolve) => files.close(resolve));
  }
}

interface Run {
  id: string;
  status: string;
  exit_reason: string | null;
  error: { code: string; cell_id: string; message: string } | null;
  steps: { id: string; namespace: string; status: string; summary: string | null }[];
}

describe("registry-style actions as workflow steps, against local mode", () => {
  let sluice: SluiceProcess;
  let api: (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;

  /** Creates an active workflow of `steps` with one HTTP trigger. */
  const workflowOf = (steps: WorkflowStepSpec[], customResponse = false) =>
    createHttpWorkflow(api, "registry actions", steps, customResponse);

  /** POSTs `payload` to the trigger: the answer, and the record of the run it started once ended. */
  async function trigger(flow: { id: string; url: string }, payload: unknown = {}) {
    const before = (await api("GET", `/workflows/${flow.id}/runs`)).json.page_info.total_count as number;
    const answer = await fetch(flow.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(payload),
    });
    const text = await answer.text();
    const run: Run = await eventually(async () => {
      const page = (await api("GET", `/workflows/${flow.id}/runs`)).json;
      const [newest] = page.data;
      return page.page_info.total_count > before && newest.status !== "running" ? newest : undefined;
    }, `a run of ${flow.id}`);
    return { answer, text, run };
  }

  const events = async (flowId: string, channel = "") =>
    (await api("GET", `/workflows/${flowId}/${channel}event_summaries?expand=event`)).json.data as {
      event: any;
    }[];

  const summaries = (run: Run) => run.steps.map((s) => s.summary);
  const statuses = (run: Run) => run.steps.map((s) => s.status);

  beforeAll(async () => {
    sluice = await startSluice({ env: { SLUICE_S3_BUCKETS: BUCKET } });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("answers a custom-response trigger with the response action's defaults, after a TypeScript action's return value", async () => {
    const flow = await workflowOf(
      [
        { namespace: "shout", code: fixture("transform-text.ts"), props: { input: "hello registry" } },
        { namespace: "answer", code: fixture("return-http-response.mjs") },
        { namespace: "report", code: REPORT },
      ],
      true,
    );
    const { answer, text, run } = await trigger(flow);
    // The defaults of the code: status 200 and the body, JSON text, sent as it is.
    expect([answer.status, text], JSON.stringify(run.error)).toEqual([200, '{ "answered": true }']);
    expect(run.status, JSON.stringify(run.error)).toBe("success");
    expect(summaries(run)).toEqual([
      "Changed the case of 14 characters (upper)",
      "Answered the caller with status 200",
      null,
    ]);
    const [emitted] = await events(flow.id);
    expect(emitted?.event.raw_event).toMatchObject({ shout: { $return_value: "HELLO REGISTRY" }, answer: {} });
  });

  it("answers with the response action's configured status, headers and body, and checks its props at create", async () => {
    const respond = fixture("return-http-response.mjs");
    const flow = await workflowOf(
      [
        {
          namespace: "answer",
          code: respond,
          props: { statusCode: 201, headers: { "x-order": "7" }, body: { ok: true, items: [1, 2] }, label: "made" },
        },
      ],
      true,
    );
    const { answer, text, run } = await trigger(flow);
    expect(answer.status).toBe(201);
    expect(answer.headers.get("x-order")).toBe("7");
    expect(answer.headers.get("content-type")).toMatch(/^application\/json/);
    expect(JSON.parse(text)).toEqual({ ok: true, items: [1, 2] });
    expect(summaries(run)).toEqual(["Answered the caller with status 201 (made)"]);

    // The prop's range is the code's: refused at create, named by the step's index.
    const refused = await api(
      "POST",
      "/workflows",
      httpWorkflowBody("refused", [{ namespace: "answer", code: respond, props: { statusCode: 99 } }], true),
    );
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.json)).toContain("steps[0].props.statusCode");
  });

  it("runs additionalProps at create: the props it adds are checked there and reach the step as this.<prop>", async () => {
    const action = fixture("get-or-default.mjs");
    const flow = await workflowOf([
      { namespace: "plain", code: action, props: { input: "given" } },
      { namespace: "fallback", code: action, props: { useFallback: "Yes", fallback: "ab", repeat: 3 } },
      { namespace: "defaulted", code: action, props: { useFallback: "Yes", fallback: "z" } },
      { namespace: "report", code: REPORT },
    ]);
    const { run } = await trigger(flow);
    expect(run.status, JSON.stringify(run.error)).toBe("success");
    expect(summaries(run)).toEqual([
      "Returned the input",
      "Returned the fallback 3 time(s)",
      "Returned the fallback 1 time(s)",
      null,
    ]);
    const [emitted] = await events(flow.id);
    expect(emitted?.event.raw_event).toMatchObject({
      plain: { $return_value: "given" },
      fallback: { $return_value: "ababab" },
      defaulted: { $return_value: "z" },
    });
    // The view shows the dynamic props as configured.
    const shown = (await api("GET", `/workflows/${flow.id}`)).json.data.steps[1];
    expect(JSON.parse(shown.configured_props_json)).toMatchObject({ useFallback: "Yes", fallback: "ab", repeat: 3 });

    // A dynamic prop's bad value, a missing one, and one additionalProps did not add are refused by name.
    for (const [props, field] of [
      [{ useFallback: "Yes", fallback: "x", repeat: 0 }, "steps[0].props.repeat"],
      [{ useFallback: "Yes" }, "steps[0].props.fallback"],
      [{ useFallback: "No", fallback: "x" }, "steps[0].props.fallback"],
    ] as const) {
      const refused = await api(
        "POST",
        "/workflows",
        httpWorkflowBody("refused", [{ namespace: "a", code: action, props }], false),
      );
      expect(refused.status, JSON.stringify(refused.json)).toBe(400);
      expect(refused.json.details).toContainEqual(expect.objectContaining({ field }));
    }
  });

  it("evaluates {{ ... }} expressions in props against the trigger and earlier steps, as the step starts", async () => {
    const flow = await workflowOf(
      [
        {
          namespace: "shout",
          code: fixture("transform-text.ts"),
          props: { input: "hi {{steps.trigger.event.body.name}}" },
        },
        {
          namespace: "answer",
          code: fixture("return-http-response.mjs"),
          props: {
            statusCode: "{{steps.trigger.event.body.code}}",
            body: { greeting: "{{steps.shout.$return_value}}", n: "{{steps.trigger.event.body.n * 2}}" },
          },
        },
      ],
      true,
    );
    const { answer, text, run } = await trigger(flow, { name: "ada", code: 202, n: 5 });
    expect(run.status, JSON.stringify(run.error)).toBe("success");
    expect(answer.status).toBe(202);
    expect(JSON.parse(text)).toEqual({ greeting: "HI ADA", n: 10 });
    // The view shows the expressions as written.
    const shown = (await api("GET", `/workflows/${flow.id}`)).json.data.steps[1];
    expect(JSON.parse(shown.configured_props_json).statusCode).toBe("{{steps.trigger.event.body.code}}");

    // An expression that throws fails its step, named, with the error on $errors.
    const failing = await workflowOf([
      { namespace: "shout", code: fixture("transform-text.ts"), props: { input: "{{steps.nothing.here}}" } },
    ]);
    const failed = await trigger(failing);
    expect(failed.run.status).toBe("error");
    expect(failed.run.error).toMatchObject({
      code: "PropExpressionError",
      message: expect.stringContaining('the prop "input": {{steps.nothing.here}} failed'),
    });
  });

  it("ends the run at the end-workflow action without return: the later step does not run", async () => {
    const flow = await workflowOf([
      { namespace: "stop", code: fixture("end-workflow.mjs"), props: { reason: "nothing to do" } },
      { namespace: "report", code: REPORT },
    ]);
    const { answer, run } = await trigger(flow);
    expect(answer.status).toBe(200);
    expect(run).toMatchObject({ status: "exited", exit_reason: "nothing to do", error: null });
    expect(statuses(run)).toEqual(["exited", "skipped"]);
    // The export on the line after $.flow.exit never ran.
    expect(summaries(run)).toEqual([null, null]);
    expect(await events(flow.id)).toEqual([]);
    expect(await events(flow.id, "$errors/")).toEqual([]);

    // With a custom response, a run that exits without responding answers the original's 400.
    const responding = await workflowOf([{ namespace: "stop", code: fixture("end-workflow.mjs") }], true);
    const ended = await trigger(responding);
    expect([ended.answer.status, ended.text]).toEqual([400, "No $.respond called in workflow"]);
    expect(ended.run).toMatchObject({ status: "exited", exit_reason: null });
  });

  it("continues past the end-workflow action when its condition is false, calling its app's method without an account", async () => {
    const flow = await workflowOf([
      { namespace: "stop", code: fixture("end-workflow.mjs"), props: { condition: false } },
      { namespace: "report", code: REPORT },
    ]);
    const { run } = await trigger(flow);
    expect(run.status, JSON.stringify(run.error)).toBe("success");
    expect(statuses(run)).toEqual(["success", "success"]);
    expect(summaries(run)).toEqual(["Continued (account keys: 0)", null]);
    const [emitted] = await events(flow.id);
    // Returned nothing: the step holds its `$summary` export and no `$return_value`.
    expect(emitted?.event.raw_event.stop).toEqual({ $summary: "Continued (account keys: 0)" });
  });

  it("exports parsed variables for later steps, and fails with its ConfigurationError on $errors for bad input", async () => {
    const exportVariables = fixture("export-variables.mjs");
    const flow = await workflowOf([
      {
        namespace: "vars",
        code: exportVariables,
        props: { values: { name: "ann", items: "[1, 2]", options: '{"deep": true}', blank: "  " } },
      },
      { namespace: "report", code: REPORT },
    ]);
    const { run } = await trigger(flow);
    expect(run.status, JSON.stringify(run.error)).toBe("success");
    expect(summaries(run)).toEqual(["Exported 4 values", null]);
    const [emitted] = await events(flow.id);
    // `blank` became undefined, which JSON does not carry.
    expect(emitted?.event.raw_event.vars.values).toEqual({ name: "ann", items: [1, 2], options: { deep: true } });

    const broken = await workflowOf([
      { namespace: "vars", code: exportVariables, props: { values: { items: "[1, 2" } } },
      { namespace: "report", code: REPORT },
    ]);
    const failed = await trigger(broken, { order: 9 });
    expect(failed.run).toMatchObject({
      status: "error",
      error: { code: "ConfigurationError", cell_id: broken.stepIds[0] },
    });
    expect(statuses(failed.run)).toEqual(["error", "skipped"]);
    const [error] = await events(broken.id, "$errors/");
    expect(error?.event.error).toMatchObject({
      code: "ConfigurationError",
      cellId: broken.stepIds[0],
      message: "The value of `items` is not valid JSON",
      // Its stack is not exposed: the error reads as the message alone, as in the original.
      stack: "ConfigurationError: The value of `items` is not valid JSON",
    });
    expect(error?.event.original_event).toMatchObject({ body: { order: 9 } });
    expect(await events(broken.id)).toEqual([]);
  });

  it("sends to S3 with the send-to-S3 action, its optional prefix left unset", async () => {
    const flow = await workflowOf([
      { namespace: "store", code: fixture("send-to-s3.mjs"), props: { bucket: BUCKET, payload: { id: "S3-1" } } },
    ]);
    const { run } = await trigger(flow);
    expect(run.status, JSON.stringify(run.error)).toBe("success");
    const folder = join(sluice.dataDir, "s3", BUCKET);
    const file = await eventually(() => {
      try {
        // Not the sink's temporary file (`<key>.<random>.partial`), which it renames onto the key.
        return readdirSync(folder).find((name) => name.startsWith(run.id) && !name.endsWith(".partial"));
      } catch {
        return undefined;
      }
    }, "the object");
    expect(JSON.parse(readFileSync(join(folder, file), "utf8"))).toEqual({ id: "S3-1" });
  });

  it("returns axios($, config)'s data and exports its debug_config and debug_response to later steps", async () => {
    const receiver = await WebhookReceiver.start();
    try {
      const flow = await workflowOf([
        { namespace: "fetch", code: fixture("get-json.mjs"), props: { url: receiver.url("/doc?lang=en") } },
        { namespace: "report", code: REPORT },
      ]);
      const { run } = await trigger(flow);
      expect(run.status, JSON.stringify(run.error)).toBe("success");
      expect(summaries(run)).toEqual(["Got 2 characters", null]);
      // The query string moved into params, which lost their undefined key, as the original does.
      expect(receiver.requests).toMatchObject([
        { method: "GET", path: "/doc?page=2&lang=en", headers: { "user-agent": "@PipedreamHQ/pipedream v0.1" } },
      ]);
      const [report] = await events(flow.id);
      expect(report?.event.raw_event.fetch).toMatchObject({
        $return_value: "ok",
        debug_config: { url: receiver.url("/doc"), params: { page: 2, lang: "en" } },
        debug_response: "ok",
      });
    } finally {
      await receiver.stop();
    }
  });

  it("downloads a file to the workflow's /tmp with one action and reads it with the next; dir props take no value", async () => {
    const csv = "id,total\n1,3\n2,4\n";
    await withCsvServed("orders.csv", csv, async (url) => {
      const download = {
        namespace: "download",
        code: fixture("download-to-tmp.mjs"),
        props: { url, filename: "orders.csv" },
      };
      const rows = {
        namespace: "rows",
        code: fixture("csv-rows-from-file.mjs"),
        props: { filePath: "{{steps.download.$return_value[1]}}" },
      };
      const flow = await workflowOf([download, rows, { namespace: "report", code: REPORT }]);
      const { run } = await trigger(flow);
      expect(run.status, JSON.stringify(run.error)).toBe("success");
      expect(summaries(run)).toEqual([
        `Saved ${csv.length} bytes to /tmp/orders.csv`,
        "Read 2 rows from /tmp/orders.csv",
        null,
      ]);
      const [report] = await events(flow.id);
      expect(report?.event.raw_event).toMatchObject({
        download: { $return_value: ["orders.csv", "/tmp/orders.csv"] },
        rows: {
          $return_value: [
            { id: "1", total: "3" },
            { id: "2", total: "4" },
          ],
        },
      });

      // Another workflow has a /tmp of its own: the file is not there, and the error names /tmp.
      const reader = await workflowOf([{ ...rows, props: { filePath: "/tmp/orders.csv" } }]);
      const missing = await trigger(reader);
      expect(missing.run.error).toMatchObject({
        code: "Error",
        message: "ENOENT: no such file or directory, open '/tmp/orders.csv'",
      });

      // A dir prop is Sluice's: a value for it is refused, naming the step's prop.
      const refused = await api(
        "POST",
        "/workflows",
        httpWorkflowBody("dir value", [{ ...download, props: { ...download.props, syncDir: "/data" } }], false),
      );
      expect(refused.status).toBe(400);
      expect(JSON.stringify(refused.json)).toContain("steps[0].props.syncDir");
    });
  });

  it("keeps a file in the project's File Store with the file_store actions, which need no account", async () => {
    const csv = "id,total\n7,70\n";
    await withCsvServed("late.csv", csv, async (url) => {
      // One workflow saves a download from /tmp into the File Store, another from the URL itself.
      const saver = await workflowOf([
        { namespace: "download", code: fixture("download-to-tmp.mjs"), props: { url, filename: "late.csv" } },
        {
          namespace: "keep",
          code: fixture("file-store-upload.mjs"),
          props: { path: "orders/late.csv", localFilePath: "late.csv" },
        },
        { namespace: "copy", code: fixture("file-store-upload.mjs"), props: { path: "orders/copy.csv", url } },
        { namespace: "list", code: fixture("file-store-list.mjs"), props: { directory: "orders", filter: "Files" } },
        { namespace: "report", code: REPORT },
      ]);
      const saved = await trigger(saver);
      expect(saved.run.status, JSON.stringify(saved.run.error)).toBe("success");
      expect(summaries(saved.run)).toEqual([
        `Saved ${csv.length} bytes to /tmp/late.csv`,
        'Uploaded the file to "orders/late.csv"',
        'Uploaded the file to "orders/copy.csv"',
        "Listed 2 entries in orders",
        null,
      ]);
      const [report] = await events(saver.id);
      expect(report?.event.raw_event).toMatchObject({
        keep: { $return_value: { type: "PipedreamProjectFile", path: "orders/late.csv" } },
        list: {
          $return_value: [
            { path: "orders/copy.csv", name: "copy.csv", folder: false, size: csv.length },
            { path: "orders/late.csv", name: "late.csv", folder: false, size: csv.length },
          ],
        },
      });

      // A workflow that never saw the download reads the file back through /tmp, and its URL.
      const reader = await workflowOf([
        { namespace: "fetch", code: fixture("file-store-download.mjs"), props: { filePath: "orders/late.csv" } },
        {
          namespace: "rows",
          code: fixture("csv-rows-from-file.mjs"),
          props: { filePath: "{{steps.fetch.$return_value}}" },
        },
        { namespace: "report", code: REPORT },
      ]);
      const read = await trigger(reader);
      expect(read.run.status, JSON.stringify(read.run.error)).toBe("success");
      const [rows] = await events(reader.id);
      expect(rows?.event.raw_event.rows.$return_value).toEqual([{ id: "7", total: "70" }]);
      expect(await (await fetch(rows?.event.raw_event.fetch.url)).text()).toBe(csv);

      // Neither a local path nor a URL: the action's own ConfigurationError.
      const neither = await workflowOf([
        { namespace: "keep", code: fixture("file-store-upload.mjs"), props: { path: "x" } },
      ]);
      expect((await trigger(neither)).run.error).toMatchObject({
        code: "ConfigurationError",
        message: "Give either a File URL or a Local File Path.",
      });
    });
  });

  it("sends an http_request prop's configured request with execute() and returns its answer", async () => {
    const receiver = await WebhookReceiver.start();
    try {
      const flow = await workflowOf([
        {
          namespace: "request",
          code: fixture("send-http-request.mjs"),
          props: {
            request: {
              url: receiver.url("/hook"),
              headers: [{ name: "x-from", value: "step" }],
              body: { type: "fields", contentType: "application/json", fields: [{ name: "id", value: "42" }] },
            },
          },
        },
        { namespace: "report", code: REPORT },
      ]);
      const { run } = await trigger(flow);
      expect(run.status, JSON.stringify(run.error)).toBe("success");
      // The prop's default method (POST) is kept under the configured value.
      expect(receiver.requests).toMatchObject([
        { method: "POST", path: "/hook", headers: { "x-from": "step" }, body: '{"id":"42"}' },
      ]);
      const [report] = await events(flow.id);
      expect(report?.event.raw_event.request.$return_value).toMatchObject({ status: 200, data: "ok" });
    } finally {
      await receiver.stop();
    }
  });
});
