import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createWorkflowHandler } from "#runtime/lambda-entry";
import type { WorkflowInvocation, WorkflowLimits, WorkflowResult, WorkflowStepInvocation } from "#runtime/protocol";
import { parseWorkflowResult } from "#runtime/protocol-parsers";
import { ERROR_TEXT_MAX_CHARS, LOG_MAX_BYTES, SUMMARY_MAX_CHARS } from "#runtime/result-limits";
import { failCurrentInvocation } from "#runtime/run-invocation";
import { runWorkflowSteps } from "#runtime/run-workflow";

// Fixtures are written the way the public registry writes actions and code steps: props with
// defaults, methods, `run({ steps, $ })`, `$.export("$summary", ...)`, `$.flow.exit` without return.

type Component = Record<string, unknown>;

/** The `$` a step receives, as the fixtures call it. */
interface Dollar {
  export(name: string, value: unknown): void;
  respond(spec: unknown): Promise<void>;
  context: Record<string, unknown>;
  flow: {
    exit(reason?: unknown): never;
    delay(ms?: unknown): unknown;
    rerun(ms?: unknown, context?: unknown, maxReruns?: unknown): unknown;
    suspend(timeoutMs?: unknown): unknown;
    refreshTimeout(): unknown;
  };
  files: {
    open(path: unknown): { toUrl(): Promise<string> };
    openDescriptor(descriptor: unknown): unknown;
    dir(path?: unknown): AsyncIterable<unknown>;
  };
  send: Send;
}
type Send = Record<"http" | "emit" | "sse" | "s3" | "email", (config?: unknown) => void>;

const LIMITS: WorkflowLimits = {
  maxEmits: 5,
  maxEmitBytes: 10_000,
  maxSends: 10,
  maxSendBytes: 100_000,
  maxExportBytes: 1024 * 1024,
};

let counter = 0;

/** A workflow whose steps are `components`, one per namespace, in order. */
function workflow(
  components: Record<string, Component>,
  overrides: Partial<WorkflowInvocation> = {},
  stepOverrides: Record<string, Partial<WorkflowStepInvocation>> = {},
): { load: (module: string) => Promise<unknown>; invocation: WorkflowInvocation } {
  counter += 1;
  const steps = Object.keys(components).map(
    (namespace): WorkflowStepInvocation => ({
      id: `c_${namespace}`,
      namespace,
      module: `hash_${namespace}`,
      props: {},
      propTypes: {},
      db: {},
      ...stepOverrides[namespace],
    }),
  );
  const load = async (module: string) => {
    const component = components[module.replace(/^hash_/, "")];
    if (!component) throw new Error(`no module ${module}`);
    return component;
  };
  const invocation: WorkflowInvocation = {
    invocationId: `inv_${counter}`,
    kind: "workflow",
    workflowId: "p_test",
    trigger: { event: { body: { order: 7 } }, context: { source_type: "HTTP" } },
    context: { id: "run_1", workflow_id: "p_test", run: { runs: 1, retry_count: 0 } },
    steps,
    respondable: false,
    timeoutMs: 5000,
    limits: LIMITS,
    ...overrides,
  };
  return { load, invocation };
}

async function run(
  components: Record<string, Component>,
  overrides: Partial<WorkflowInvocation> = {},
  stepOverrides: Record<string, Partial<WorkflowStepInvocation>> = {},
): Promise<WorkflowResult> {
  const { load, invocation } = workflow(components, overrides, stepOverrides);
  const result = await runWorkflowSteps(load, invocation);
  // Whatever the steps did, the result is one the trusted side's parser takes.
  const parsed = parseWorkflowResult(JSON.parse(JSON.stringify(result)), invocation.invocationId);
  if (!parsed.ok) throw new Error(`the runtime built a malformed result: ${parsed.problem}`);
  return result;
}

/** A step that records what it sees through `$.export("seen", ...)` of the step after it. */
const probe = (see: (steps: Record<string, unknown>, $: Dollar) => unknown): Component => ({
  async run({ steps, $ }: { steps: Record<string, unknown>; $: Dollar }) {
    $.send.emit({ raw_event: see(steps, $) ?? null });
  },
});

const emitted = (result: WorkflowResult) =>
  result.sends.filter((send) => send.type === "emit").map((send) => (send as { raw_event: unknown }).raw_event);

describe("runWorkflowSteps: steps and their results", () => {
  it("gives steps.trigger.context a copy of the run's context when the trigger has none of its own", async () => {
    const result = await run(
      {
        change: probe((steps) => {
          const trigger = steps.trigger as { context: { id: string; run: { runs: number } } };
          const seen = structuredClone(trigger.context);
          trigger.context.run.runs = 99;
          return seen;
        }),
        after: probe((_steps, $) => ($ as unknown as { context: { run: { runs: number } } }).context.run.runs),
      },
      { trigger: { event: { n: 1 } } },
    );
    expect(emitted(result)).toEqual([{ id: "run_1", workflow_id: "p_test", run: { runs: 1, retry_count: 0 } }, 1]);
  });

  it("runs the steps in order; each sees the trigger and the earlier steps' return values and exports", async () => {
    const order: string[] = [];
    const result = await run({
      parse: {
        async run({ steps, $ }: { steps: { trigger: { event: { body: { order: number } } } }; $: Component }) {
          order.push("parse");
          ($.export as (n: string, v: unknown) => void)("orderId", steps.trigger.event.body.order);
          return { total: 12.5, at: new Date(0) };
        },
      },
      enrich: {
        run({ steps }: { steps: Record<string, Record<string, unknown>> }) {
          order.push("enrich");
          const parse = steps.parse as Record<string, unknown>;
          return `order ${parse.orderId} of ${(parse.$return_value as { total: number }).total}`;
        },
      },
      check: probe((steps) => ({ ...steps, trigger: (steps.trigger as { event: unknown }).event })),
    });
    expect(order).toEqual(["parse", "enrich"]);
    expect(result.steps.map((step) => [step.id, step.status])).toEqual([
      ["c_parse", "success"],
      ["c_enrich", "success"],
      ["c_check", "success"],
    ]);
    expect(emitted(result)).toEqual([
      {
        trigger: { body: { order: 7 } },
        parse: { orderId: 7, $return_value: { total: 12.5, at: "1970-01-01T00:00:00.000Z" } },
        enrich: { $return_value: "order 7 of 12.5" },
      },
    ]);
  });

  it("hands later steps a JSON copy: changing an exported object afterwards changes nothing", async () => {
    let kept: Record<string, unknown> | undefined;
    const result = await run({
      first: {
        run({ $ }: { $: { export(n: string, v: unknown): void } }) {
          kept = { count: 1, fn() {}, big: 10n, nested: { ok: true } };
          (kept.nested as Record<string, unknown>).self = kept;
          $.export("value", kept);
          kept.count = 2;
        },
      },
      second: probe((steps) => steps.first),
    });
    expect(kept?.count).toBe(2);
    // Functions and bigints are left out, a cycle is cut, as JSON would carry it.
    expect(emitted(result)).toEqual([{ value: { count: 1, nested: { ok: true } } }]);
    expect(result.steps[0]?.exportBytes).toBe(Buffer.byteLength(JSON.stringify({ count: 1, nested: { ok: true } })));
  });

  it("copies values as JSON.stringify would: a URL as its text, a class by its toJSON", async () => {
    class Money {
      constructor(readonly cents: number) {}
      toJSON() {
        return { amount: this.cents / 100, currency: "EUR" };
      }
    }
    const result = await run({
      first: {
        run({ $ }: { $: { export(n: string, v: unknown): void } }) {
          $.export("link", new URL("https://shop.example/o/7"));
          return { total: new Money(1250) };
        },
      },
      second: probe((steps) => steps.first),
    });
    expect(emitted(result)).toEqual([
      { link: "https://shop.example/o/7", $return_value: { total: { amount: 12.5, currency: "EUR" } } },
    ]);
  });

  it("keeps a namespace or an export named __proto__ as data", async () => {
    const result = await run({
      ["__proto__"]: {
        run({ $ }: { $: { export(n: string, v: unknown): void } }) {
          $.export("__proto__", { polluted: true });
        },
      },
      after: probe((steps) => ({
        own: Object.hasOwn(steps, "__proto__"),
        inner: Object.hasOwn(Object.getOwnPropertyDescriptor(steps, "__proto__")?.value ?? {}, "__proto__"),
        polluted: ({} as Record<string, unknown>).polluted ?? null,
      })),
    });
    expect(emitted(result)).toEqual([{ own: true, inner: true, polluted: null }]);
  });

  it("takes $summary as the step's summary, cut, and refuses to export $return_value", async () => {
    const result = await run({
      long: {
        run({ $ }: { $: { export(n: string, v: unknown): void } }) {
          $.export("$summary", "x".repeat(SUMMARY_MAX_CHARS + 50));
        },
      },
      forged: {
        run({ $ }: { $: { export(n: string, v: unknown): void } }) {
          $.export("$return_value", "forged");
        },
      },
      never: probe(() => "ran"),
    });
    expect(result.steps[0]?.summary).toBe("x".repeat(SUMMARY_MAX_CHARS));
    expect(result.steps[1]).toMatchObject({ status: "error", error: { name: "TypeError" } });
    expect(result.steps[1]?.error?.message).toContain("$return_value");
    expect(result.steps).toHaveLength(2);
  });

  it("gives actions their props and methods as this, and each step its own $.service.db", async () => {
    const action = {
      key: "fixture-greet",
      type: "action",
      props: { db: "$.service.db", greeting: { type: "string", default: "hello" } },
      methods: {
        shout(this: { greeting: string }, text: string) {
          return `${this.greeting} ${text}`.toUpperCase();
        },
      },
      run(this: { db: { get(k: string): unknown; set(k: string, v: unknown): void }; shout(t: string): string }) {
        const seen = this.db.get("count") ?? 0;
        this.db.set("count", (seen as number) + 1);
        return this.shout(`seen ${seen}`);
      },
    };
    const result = await run(
      { one: action, two: action, check: probe((steps) => [steps.one, steps.two]) },
      {},
      {
        one: { props: { greeting: "hi" }, propTypes: { greeting: "string" }, db: { count: 4 } },
        two: { props: { greeting: "yo" }, propTypes: { greeting: "string" }, db: {} },
      },
    );
    expect(emitted(result)).toEqual([[{ $return_value: "HI SEEN 4" }, { $return_value: "YO SEEN 0" }]]);
    expect(result.steps.map((step) => step.dbWrites)).toEqual([{ count: 5 }, { count: 1 }, {}]);
  });

  it("refuses this.$emit in a step: an action sends with $.send.emit", async () => {
    const result = await run({
      emitter: {
        run(this: { $emit(e: unknown): void }) {
          this.$emit({ a: 1 });
        },
      },
    });
    expect(result.steps[0]).toMatchObject({ status: "error", error: { name: "TypeError" } });
    expect(result.steps[0]?.error?.message).toContain("$.send.emit");
    expect(result.sends).toEqual([]);
  });
});

describe("runWorkflowSteps: errors end the run at the step that threw", () => {
  it.each([
    ["an Error subclass", () => Object.assign(new RangeError("out of range"), {}), "RangeError", "out of range"],
    ["a string", () => "plain text", "Error", "plain text"],
    ["a number", () => 42, "Error", "42"],
    ["undefined", () => undefined, "Error", "undefined"],
    ["an object with a message", () => ({ message: "shaped", code: 7 }), "Error", "shaped"],
    [
      "a forged exit sentinel",
      () => ({ name: "FlowExit", message: "fake", __pd_end: { message: "fake", ts: 1 } }),
      "FlowExit",
      "fake",
    ],
  ])("names the step when it throws %s, and runs no later step", async (_kind, thrown, name, message) => {
    let laterRan = false;
    const result = await run({
      ok: { run: () => "fine" },
      bad: {
        async run() {
          throw thrown();
        },
      },
      later: {
        run() {
          laterRan = true;
        },
      },
    });
    expect(laterRan).toBe(false);
    expect(result.steps.map((step) => step.status)).toEqual(["success", "error"]);
    expect(result.steps[1]).toMatchObject({ id: "c_bad", error: { name, message } });
    expect(result.error).toBeUndefined();
  });

  it("fails a step whose module does not load, or exports no run, with the step named", async () => {
    const result = await run({ fine: { run: () => 1 } }, {}, { fine: { module: "hash_missing" } });
    expect(result.steps[0]).toMatchObject({ id: "c_fine", status: "error", error: { name: "LoadError" } });
    const noRun = await run({ shapeless: { props: {} } });
    expect(noRun.steps[0]).toMatchObject({ status: "error", error: { name: "TypeError" } });
  });

  it("cuts a huge error message and stack, so the result still crosses", async () => {
    const result = await run({
      huge: {
        run() {
          const error = new Error("m".repeat(5_000_000));
          error.stack = "s".repeat(5_000_000);
          throw error;
        },
      },
    });
    const error = result.steps[0]?.error;
    expect(error?.message.length).toBeLessThan(ERROR_TEXT_MAX_CHARS + 20);
    expect(error?.stack?.length).toBeLessThan(ERROR_TEXT_MAX_CHARS + 20);
    expect(JSON.stringify(result).length).toBeLessThan(64 * 1024);
  });

  it("ends the run with a TimeoutError on the step running at the deadline", async () => {
    const result = await run(
      {
        quick: { run: () => "done" },
        slow: { run: () => new Promise(() => {}) },
        never: { run: () => "never" },
      },
      { timeoutMs: 100 },
    );
    expect(result.steps.map((step) => [step.id, step.status])).toEqual([
      ["c_quick", "success"],
      ["c_slow", "error"],
    ]);
    expect(result.steps[1]?.error?.name).toBe("TimeoutError");
  });

  it("ends the step whose callback threw where nobody could catch it", async () => {
    const result = await run({
      stray: {
        run() {
          setTimeout(() => failCurrentInvocation(new Error("stray")), 5);
          return new Promise(() => {});
        },
      },
      never: { run: () => "never" },
    });
    expect(result.steps).toHaveLength(1);
    expect(result.steps[0]).toMatchObject({ status: "error", error: { message: "stray" } });
  });
});

describe("runWorkflowSteps: $.flow.exit", () => {
  // The registry's End Workflow action calls it without `return`, then exports a summary.
  const endWorkflow = {
    key: "fixture-end-workflow",
    type: "action",
    props: { reason: { type: "string", optional: true } },
    async run(
      this: { reason?: string },
      { $ }: { $: { flow: { exit(r?: string): void }; export(n: string, v: unknown): void } },
    ) {
      $.flow.exit(this.reason);
      $.export("$summary", "ended");
    },
  };

  it("ends the run as exited, with or without return; no later step runs", async () => {
    let laterRan = false;
    const later = {
      run() {
        laterRan = true;
      },
    };
    const withoutReturn = await run(
      { first: { run: () => 1 }, end: endWorkflow, later },
      {},
      { end: { props: { reason: "nothing to do" }, propTypes: { reason: "string" } } },
    );
    expect(withoutReturn.steps.map((step) => step.status)).toEqual(["success", "exited"]);
    expect(withoutReturn.steps[1]).toMatchObject({ exitReason: "nothing to do" });
    expect(withoutReturn.steps[1]?.summary).toBeUndefined();
    expect(withoutReturn.steps[1]?.error).toBeUndefined();

    const withReturn = await run({
      end: {
        run({ $ }: { $: { flow: { exit(r?: unknown): unknown } } }) {
          return $.flow.exit();
        },
      },
      later,
    });
    expect(withReturn.steps).toEqual([expect.objectContaining({ status: "exited" })]);
    expect(withReturn.steps[0]?.exitReason).toBeUndefined();
    expect(laterRan).toBe(false);
  });

  it("still ends the run when the step catches the exit and goes on: what it does after counts for nothing", async () => {
    let laterRan = false;
    let caught: unknown;
    const result = await run(
      {
        sneaky: {
          async run({ $ }: { $: Dollar }) {
            $.send.http({ method: "POST", url: "https://example.com/before" });
            try {
              $.flow.exit("stop");
            } catch (error) {
              caught = error;
            }
            $.send.http({ method: "POST", url: "https://example.com/after" });
            await $.respond({ status: 201, body: "after exit" });
            $.export("$summary", "kept going");
            throw new Error("and then failed");
          },
        },
        later: {
          run() {
            laterRan = true;
          },
        },
      },
      { respondable: true },
    );
    expect((caught as Error).message).toBe("stop");
    expect(laterRan).toBe(false);
    expect(result.steps).toEqual([expect.objectContaining({ id: "c_sneaky", status: "exited", exitReason: "stop" })]);
    expect(result.steps[0]?.error).toBeUndefined();
    expect(result.sends).toEqual([{ type: "http", method: "POST", url: "https://example.com/before" }]);
    expect(result.response).toBeUndefined();
  });
});

describe("runWorkflowSteps: $.respond", () => {
  // The registry's Return HTTP Response action, with its status as a prop.
  const returnResponse = {
    key: "fixture-return-http-response",
    type: "action",
    props: { resStatusCode: { type: "integer", default: 200 }, resBody: { type: "any", optional: true } },
    async run(
      this: { resStatusCode: number; resBody: unknown },
      { $ }: { $: { respond(spec: unknown): Promise<void>; export(n: string, v: unknown): void } },
    ) {
      await $.respond({ status: this.resStatusCode, headers: { "x-step": "2" }, body: this.resBody });
      $.export("$summary", `Responded with status ${this.resStatusCode}`);
    },
  };

  it("answers with the first response of the run, normalised, when the trigger is respondable", async () => {
    const result = await run(
      {
        first: { run: () => "first" },
        reply: returnResponse,
        again: {
          async run({ $ }: { $: { respond(spec: unknown): Promise<void> } }) {
            await $.respond({ status: 500, body: "second" });
          },
        },
      },
      { respondable: true },
      { reply: { props: { resStatusCode: 201, resBody: { ok: true } }, propTypes: { resStatusCode: "integer" } } },
    );
    expect(result.response).toEqual({
      status: 201,
      headers: { "x-step": "2", "content-type": "application/json" },
      body: '{"ok":true}',
    });
    expect(result.steps.map((step) => step.status)).toEqual(["success", "success", "success"]);
    expect(result.steps[1]?.summary).toBe("Responded with status 201");
  });

  it("keeps immediate, and throws to the step on a bad status", async () => {
    const immediate = await run(
      {
        reply: {
          async run({ $ }: { $: { respond(spec: unknown): Promise<void> } }) {
            await $.respond({ status: "202", body: "queued", immediate: true });
          },
        },
      },
      { respondable: true },
    );
    expect(immediate.response).toEqual({ status: 202, headers: {}, body: "queued", immediate: true });
    const bad = await run(
      {
        reply: {
          run({ $ }: { $: { respond(spec: unknown): Promise<void> } }) {
            return $.respond({ status: 99 });
          },
        },
      },
      { respondable: true },
    );
    expect(bad.response).toBeUndefined();
    expect(bad.steps[0]?.status).toBe("error");
  });

  it("reads a stream body first (the original's awaited Readable), and the first call still wins", async () => {
    type Respond = { respond(spec: unknown): Promise<void> };
    const result = await run(
      {
        reply: {
          async run({ $ }: { $: Respond }) {
            const streamed = $.respond({
              status: 200,
              headers: { "content-type": "text/csv" },
              body: Readable.from(["a,b\n", Buffer.from("1,2\n")]),
            });
            // Called while the first is being read: ignored, as any later call.
            await $.respond({ status: 500, body: "second" });
            await streamed;
          },
        },
        after: { run: () => "ran" },
      },
      { respondable: true },
    );
    expect(result.response).toEqual({
      status: 200,
      headers: { "content-type": "text/csv" },
      body: Buffer.from("a,b\n1,2\n").toString("base64"),
      bodyEncoding: "base64",
    });
    expect(result.steps.map((step) => step.status)).toEqual(["success", "success"]);
    // A web ReadableStream is read the same way.
    const web = await run(
      {
        reply: {
          async run({ $ }: { $: Respond }) {
            await $.respond({ status: 201, body: new Blob(["from a web stream"]).stream() });
          },
        },
      },
      { respondable: true },
    );
    expect(Buffer.from(web.response?.body ?? "", "base64").toString()).toBe("from a web stream");
  });

  it("refuses a stream body with immediate, one of objects, and one over the limit, to the step", async () => {
    const refused = async (body: () => unknown, immediate = false) => {
      const result = await run(
        {
          reply: {
            async run({ $ }: { $: { respond(spec: unknown): Promise<void> } }) {
              await $.respond({ status: 200, body: body(), immediate });
            },
          },
        },
        { respondable: true },
      );
      expect(result.response).toBeUndefined();
      return result.steps[0]?.error?.message;
    };
    expect(await refused(() => Readable.from(["x"]), true)).toMatch(/cannot be combined with immediate/);
    expect(await refused(() => Readable.from([{ not: "bytes" }]))).toMatch(/must give bytes or text/);
    let destroyed = false;
    const endless = () =>
      new Readable({
        read() {
          this.push(Buffer.alloc(1024 * 1024));
        },
        destroy(error, done) {
          destroyed = true;
          done(error);
        },
      });
    expect(await refused(endless)).toMatch(/over the limit of 4194304 bytes/);
    expect(destroyed).toBe(true);
  });

  it("is ignored with a warning naming the step when the trigger does not return a custom response", async () => {
    const result = await run({ reply: returnResponse }, {}, { reply: { props: { resStatusCode: 200 } } });
    expect(result.response).toBeUndefined();
    expect(result.steps[0]?.status).toBe("success");
    expect(result.logs).toEqual([expect.objectContaining({ level: "warn", step: "c_reply" })]);
  });
});

describe("runWorkflowSteps: $.send", () => {
  it("records each send in call order, in its payload shape", async () => {
    const result = await run({
      sender: {
        run({ $ }: { $: { send: Send } }) {
          $.send.http({
            method: "put",
            url: "https://example.com/hook",
            headers: { "x-n": 1 },
            params: { q: "a" },
            auth: { username: "u", password: "p" },
            data: { at: new Date(0), fn() {} },
          });
          $.send.emit({ raw_event: { n: 1 } });
          $.send.sse({ channel: "updates", payload: "hello" });
          $.send.s3({ bucket: "b", prefix: "runs/", payload: [1, 2] });
          $.send.http({ url: "https://example.com/default-method" });
          // The registry's send-to-S3 action passes its optional prefix as it is, unset included.
          $.send.s3({ bucket: "b", prefix: undefined, payload: 3 });
        },
      },
    });
    expect(result.sends).toEqual([
      {
        type: "http",
        method: "PUT",
        url: "https://example.com/hook",
        headers: { "x-n": "1" },
        params: { q: "a" },
        auth: { username: "u", password: "p" },
        data: { at: "1970-01-01T00:00:00.000Z" },
      },
      { type: "emit", raw_event: { n: 1 } },
      { type: "sse", channel: "updates", payload: "hello" },
      { type: "s3", bucket: "b", prefix: "runs/", payload: [1, 2] },
      { type: "http", method: "POST", url: "https://example.com/default-method" },
      { type: "s3", bucket: "b", prefix: "", payload: 3 },
    ]);
  });

  it.each([
    ["http without a url", (send: Send) => send.http({ method: "POST" }), "url"],
    ["http with an unknown method", (send: Send) => send.http({ method: "BREW", url: "https://x" }), "method"],
    ["http with an object header", (send: Send) => send.http({ url: "https://x", headers: { a: {} } }), "headers.a"],
    ["emit without raw_event", (send: Send) => send.emit({ event: 1 }), "raw_event"],
    ["sse without a channel", (send: Send) => send.sse({ payload: 1 }), "channel"],
    ["s3 without a bucket", (send: Send) => send.s3({ prefix: "p", payload: 1 }), "bucket"],
    [
      "s3 with a prefix that is not a string",
      (send: Send) => send.s3({ bucket: "b", prefix: 5, payload: 1 }),
      "prefix",
    ],
    ["a config that is not an object", (send: Send) => send.emit("text"), "expects an object"],
  ])("fails the step on %s, naming the field", async (_case, call, field) => {
    const result = await run({
      sender: {
        run({ $ }: { $: { send: Send } }) {
          call($.send);
        },
      },
    });
    expect(result.steps[0]).toMatchObject({ status: "error", error: { name: "TypeError" } });
    expect(result.steps[0]?.error?.message).toContain(field);
    expect(result.sends).toEqual([]);
  });

  it("fails a step at a wrong $.files path or description, and says when the run has no File Store", async () => {
    for (const [call, name, message] of [
      [
        ($: Dollar) => $.files.open("a/../../b"),
        "TypeError",
        'the File Store path "a/../../b" has an empty, "." or ".." part',
      ],
      [($: Dollar) => $.files.open(""), "TypeError", 'the File Store path "" names no file'],
      [($: Dollar) => $.files.open("a\\b"), "TypeError", "a backslash"],
      [($: Dollar) => $.files.open(7), "TypeError", "a File Store path must be a string, not number"],
      [($: Dollar) => $.files.openDescriptor({ path: "a" }), "TypeError", 'type "PipedreamProjectFile"'],
      [($: Dollar) => $.files.open("/report.csv").toUrl(), "FileStoreError", "this run has no File Store"],
      [
        async ($: Dollar) => {
          for await (const _ of $.files.dir()) break;
        },
        "FileStoreError",
        "this run has no File Store",
      ],
    ] as const) {
      const result = await run({ step: { run: ({ $ }: { $: Dollar }) => call($) } });
      expect(result.steps[0]?.error?.name).toBe(name);
      expect(result.steps[0]?.error?.message).toContain(message);
    }
  });

  it("answers NotImplementedError for $.send.email and $.flow.refreshTimeout", async () => {
    for (const [helper, call] of [
      ["$.send.email", ($: Dollar) => $.send.email({ subject: "s" })],
      ["$.flow.refreshTimeout", ($: Dollar) => $.flow.refreshTimeout()],
    ] as const) {
      const result = await run({ step: { run: ({ $ }: { $: Dollar }) => call($) } });
      expect(result.steps[0]?.error).toMatchObject({
        name: "NotImplementedError",
        message: `${helper} is not available in Sluice yet`,
      });
    }
  });

  it("fails the run at the send past maxSends even when the step catches it, keeping the sends before", async () => {
    let caught = 0;
    const result = await run(
      {
        flood: {
          run({ $ }: { $: { send: Send } }) {
            for (let index = 0; index < 10; index += 1) {
              try {
                $.send.http({ url: `https://example.com/${index}` });
              } catch {
                caught += 1;
              }
            }
            return "survived";
          },
        },
        later: { run: () => "never" },
      },
      { limits: { ...LIMITS, maxSends: 3 } },
    );
    // The step is over at the first refusal: later sends are dropped without another error.
    expect(caught).toBe(1);
    expect(result.sends).toHaveLength(3);
    expect(result.steps).toEqual([
      expect.objectContaining({ status: "error", error: expect.objectContaining({ name: "SendLimitError" }) }),
    ]);
  });

  it("counts emits against the emit limits and all sends against maxSendBytes", async () => {
    const emits = await run(
      {
        emitter: {
          run({ $ }: { $: { send: Send } }) {
            for (let index = 0; index < 3; index += 1) $.send.emit({ raw_event: index });
          },
        },
      },
      { limits: { ...LIMITS, maxEmits: 2 } },
    );
    expect(emits.steps[0]?.error?.name).toBe("EmitLimitError");
    expect(emits.sends).toHaveLength(2);
    const bytes = await run(
      {
        big: {
          run({ $ }: { $: { send: Send } }) {
            $.send.sse({ channel: "c", payload: "x".repeat(500) });
            $.send.s3({ bucket: "b", prefix: "p", payload: "y".repeat(600) });
          },
        },
      },
      { limits: { ...LIMITS, maxSendBytes: 1000 } },
    );
    expect(bytes.steps[0]?.error?.name).toBe("SendLimitError");
    expect(bytes.sends.map((send) => send.type)).toEqual(["sse"]);
  });
});

describe("runWorkflowSteps: limits on what a run returns", () => {
  it("fails the run at the export past maxExportBytes, even when caught; the result stays small", async () => {
    let caught: unknown;
    const result = await run(
      {
        hoard: {
          run({ $ }: { $: { export(n: string, v: unknown): void } }) {
            $.export("first", "a".repeat(600_000));
            try {
              $.export("second", "b".repeat(600_000));
            } catch (error) {
              caught = error;
            }
            return "c".repeat(10);
          },
        },
        later: { run: () => "never" },
      },
      { limits: { ...LIMITS, maxExportBytes: 1_000_000 } },
    );
    expect((caught as Error).name).toBe("ExportLimitError");
    expect(result.steps).toEqual([
      expect.objectContaining({
        status: "error",
        exportBytes: 600_002,
        error: expect.objectContaining({ name: "ExportLimitError" }),
      }),
    ]);
    // Exports never cross: 600 KB exported, a result of a few hundred bytes.
    expect(JSON.stringify(result).length).toBeLessThan(2000);
  });

  it("counts a return value toward the export limit", async () => {
    const result = await run(
      { big: { run: () => ({ data: "z".repeat(2000) }) } },
      { limits: { ...LIMITS, maxExportBytes: 1000 } },
    );
    expect(result.steps[0]?.error?.name).toBe("ExportLimitError");
  });

  it("fails the step whose export cannot be read (a getter that throws)", async () => {
    const result = await run({
      trap: {
        run({ $ }: { $: { export(n: string, v: unknown): void } }) {
          $.export(
            "trap",
            Object.defineProperty({}, "boom", {
              enumerable: true,
              get() {
                throw new Error("getter");
              },
            }),
          );
        },
      },
    });
    expect(result.steps[0]).toMatchObject({ status: "error", error: { message: "getter" } });
  });

  it("caps the logs of the whole run, each line naming its step", async () => {
    const result = await run({
      chatty: {
        run() {
          console.log("hello from %s", process.env.PD_COMPONENT);
        },
      },
      flood: {
        run() {
          for (let index = 0; index < 2000; index += 1) console.info("x".repeat(1000));
        },
      },
    });
    expect(result.logs[0]).toMatchObject({ step: "c_chatty", level: "log", message: "hello from p_test" });
    const bytes = result.logs.reduce((sum, log) => sum + Buffer.byteLength(log.message), 0);
    expect(bytes).toBeLessThanOrEqual(LOG_MAX_BYTES);
    expect(result.logs.at(-1)).toMatchObject({ step: "c_flood", level: "warn" });
    expect(result.steps.map((step) => step.status)).toEqual(["success", "success"]);
  });
});

describe("runWorkflowSteps: $.context", () => {
  it("is the run's context with the deadline of the whole run", async () => {
    const before = Date.now();
    const result = await run(
      { look: probe((steps, $) => ({ context: $.context, trigger: (steps.trigger as { context: unknown }).context })) },
      { timeoutMs: 60_000 },
    );
    const [seen] = emitted(result) as [{ context: Record<string, unknown>; trigger: unknown }];
    expect(seen.context).toMatchObject({ id: "run_1", workflow_id: "p_test", run: { runs: 1, retry_count: 0 } });
    expect(seen.context.deadline).toBeGreaterThanOrEqual(before + 60_000);
    expect(seen.context.deadline).toBeLessThanOrEqual(Date.now() + 60_000);
    expect(seen.trigger).toEqual({ source_type: "HTTP" });
  });

  it("is each step's own copy: what a step changes in it, nested or not, no later step sees", async () => {
    const { load, invocation } = workflow({
      first: {
        async run({ $ }: { $: Dollar }) {
          ($.context.run as { runs: number }).runs = 99;
          $.context.id = "changed";
          $.context.added = true;
        },
      },
      second: probe((_steps, $) => $.context),
    });
    const result = await runWorkflowSteps(load, invocation);
    const [seen] = emitted(result) as [Record<string, unknown>];
    expect(seen).toEqual({
      id: "run_1",
      workflow_id: "p_test",
      run: { runs: 1, retry_count: 0 },
      deadline: expect.any(Number),
    });
    expect(invocation.context).toEqual({ id: "run_1", workflow_id: "p_test", run: { runs: 1, retry_count: 0 } });
  });

  it("is a property like any other (copied when first read): listed, spread, assigned over", async () => {
    const { load, invocation } = workflow({
      first: {
        async run({ steps, $ }: { steps: Record<string, { context: unknown }>; $: Dollar }) {
          const listed = Object.keys($).includes("context");
          const spread = ({ ...$ }.context as { id: string }).id;
          ($ as { context: unknown }).context = "replaced";
          (steps.trigger as { context: unknown }).context = "replaced too";
          $.send.emit({
            raw_event: [listed, spread, $.context, steps.trigger?.context, Object.keys(steps.trigger ?? {})],
          } as never);
        },
      },
      second: probe((steps, $) => [$.context.id, (steps.trigger as { context: unknown }).context]),
    });
    const result = await runWorkflowSteps(load, invocation);
    expect(emitted(result)).toEqual([
      [true, "run_1", "replaced", "replaced too", ["event", "context"]],
      // A later step's `$.context` is its own; `steps.trigger` is one object the steps share, as the event is.
      ["run_1", "replaced too"],
    ]);
  });
});

describe("createWorkflowHandler: real step modules, as the Lambda entry loads them", () => {
  const folder = mkdtempSync(join(tmpdir(), "sluice-workflow-"));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));
  let loads = 0;
  const moduleFile = (name: string, code: string) => {
    const file = join(folder, `${name}.mjs`);
    writeFileSync(file, code);
    return () => {
      loads += 1;
      return import(pathToFileURL(file).href);
    };
  };

  it("loads a plain code step written with the global defineComponent, once per process", async () => {
    const handler = createWorkflowHandler({
      h1: moduleFile(
        "code-step",
        `export default defineComponent({
           async run({ steps, $ }) {
             $.export("$summary", "parsed");
             return { doubled: steps.trigger.event.n * 2 };
           },
         });`,
      ),
      h2: moduleFile(
        "typed-action",
        `export default defineAction({
           props: { label: { type: "string", default: "n" } },
           run({ steps }) { return this.label + "=" + steps.parse.$return_value.doubled; },
         });`,
      ),
    });
    const { invocation } = workflow({ parse: {}, show: {} }, { trigger: { event: { n: 21 }, context: {} } });
    invocation.steps = [
      { id: "c_1", namespace: "parse", module: "h1", props: {}, propTypes: {}, db: {} },
      { id: "c_2", namespace: "show", module: "h2", props: { label: "x" }, propTypes: { label: "string" }, db: {} },
    ];
    const first = await handler(JSON.parse(JSON.stringify(invocation)));
    const second = await handler(JSON.parse(JSON.stringify({ ...invocation, invocationId: "again" })));
    expect(first.steps.map((step) => [step.status, step.summary])).toEqual([
      ["success", "parsed"],
      ["success", undefined],
    ]);
    expect(second.steps.map((step) => step.status)).toEqual(["success", "success"]);
    expect(loads).toBe(2);
  });

  it("fails the step whose module is not in the function, and refuses a malformed invocation", async () => {
    const handler = createWorkflowHandler({});
    const { invocation } = workflow({ only: {} });
    const result = await handler(invocation);
    expect(result.steps[0]).toMatchObject({ id: "c_only", status: "error", error: { name: "LoadError" } });
    await expect(handler({ ...invocation, kind: "run" })).rejects.toThrow("invalid workflow invocation: kind");
  });
});

describe("runWorkflowSteps: hostile steps", () => {
  it("ignores what an ended step's callbacks do while later steps run", async () => {
    const result = await run(
      {
        early: {
          run({ $ }: { $: Dollar }) {
            setTimeout(() => {
              $.send.http({ url: "https://example.com/late" });
              $.export("late", true);
              void $.respond({ status: 500, body: "late" }).catch(() => {});
            }, 5);
            return "left a timer behind";
          },
        },
        waits: {
          async run() {
            await new Promise((resolve) => setTimeout(resolve, 30));
          },
        },
        check: probe((steps) => steps.early),
      },
      { respondable: true },
    );
    expect(result.steps.map((step) => step.status)).toEqual(["success", "success", "success"]);
    expect(result.sends).toEqual([{ type: "emit", raw_event: { $return_value: "left a timer behind" } }]);
    expect(result.response).toBeUndefined();
  });

  it("cannot forge its outcome: a return value shaped like a result is only an export", async () => {
    const forged = {
      invocationId: "inv_other",
      steps: [{ id: "c_x", status: "success" }],
      sends: [{ type: "http", method: "POST", url: "http://169.254.169.254/" }],
      response: { status: 200, headers: {}, body: "forged" },
      status: "success",
    };
    const result = await run({
      forger: { run: () => forged },
      fails: { run: () => Promise.reject(new Error("real")) },
    });
    expect(result.invocationId).not.toBe("inv_other");
    expect(result.sends).toEqual([]);
    expect(result.response).toBeUndefined();
    expect(result.steps.map((step) => [step.id, step.status])).toEqual([
      ["c_forger", "success"],
      ["c_fails", "error"],
    ]);
    expect(result.steps[0]?.exportBytes).toBe(Buffer.byteLength(JSON.stringify(forged)));
  });
});

describe("runWorkflowSteps: a step's connected account", () => {
  it("is its own: a later step sees another's $auth only where that step exported it", async () => {
    const SECRET = "ghp_step_a_secret_0123456789";
    const app = { type: "app", app: "github" };
    const reader = {
      key: "fixture-reader",
      type: "action",
      props: { github: app },
      run() {
        return "ran";
      },
    };
    // A hostile later step: everything it can reach of the run, as JSON.
    const nosy = {
      key: "fixture-nosy",
      type: "action",
      props: { github: app },
      run(this: Record<string, unknown>, { steps, $ }: { steps: unknown; $: Dollar }) {
        $.send.emit({ raw_event: JSON.stringify({ steps, context: $.context, self: this, auth: this.github }) });
      },
    };
    const exporter = {
      ...reader,
      run(this: { github: { $auth: unknown } }, { $ }: { $: Dollar }) {
        $.export("auth", this.github.$auth);
      },
    };
    const bound = {
      props: { github: { authProvisionId: "apn_1", $auth: { api_key: SECRET } } },
      propTypes: { github: "app" },
    };
    const quiet = await run({ a: reader, b: nosy }, {}, { a: bound, b: { propTypes: { github: "app" } } });
    expect(quiet.steps.map((step) => step.status)).toEqual(["success", "success"]);
    expect(emitted(quiet)).toHaveLength(1);
    expect(JSON.stringify(quiet)).not.toContain(SECRET);
    const shared = await run({ a: exporter, b: nosy }, {}, { a: bound, b: { propTypes: { github: "app" } } });
    expect(emitted(shared)[0]).toContain(SECRET);
  });
});

describe("runWorkflowSteps: $.flow.suspend, $.flow.delay and $.flow.rerun", () => {
  const flow = "http://127.0.0.1:1/flow/run_1/aaaaaaaaaaaaaaaaaaaaaaaa";
  const after = { run: () => "after ran" };

  it("suspends at the end of the step: the step's code goes on, its exports are kept, no later step runs", async () => {
    let urls: unknown;
    const result = await run(
      {
        first: { run: () => "one" },
        ask: {
          run({ $ }: { $: Dollar }) {
            urls = $.flow.suspend();
            $.export("note", "sent for approval");
            return "asked";
          },
        },
        after,
      },
      { flow },
    );
    expect(urls).toEqual({ resume_url: `${flow}/resume`, cancel_url: `${flow}/cancel` });
    expect(result.steps.map((step) => [step.id, step.status])).toEqual([
      ["c_first", "success"],
      ["c_ask", "success"],
    ]);
    expect(result.pause).toEqual({
      kind: "suspend",
      stepId: "c_ask",
      afterMs: 24 * 60 * 60 * 1000,
      steps: { first: { $return_value: "one" }, ask: { note: "sent for approval", $return_value: "asked" } },
    });
  });

  it("takes a suspension's timeout and a delay's length in milliseconds, rounded", async () => {
    const suspended = await run({ ask: { run: ({ $ }: { $: Dollar }) => void $.flow.suspend(5000.4) } }, { flow });
    expect(suspended.pause).toMatchObject({ kind: "suspend", afterMs: 5000 });
    const delayed = await run({ wait: { run: ({ $ }: { $: Dollar }) => void $.flow.delay(60_000) }, after }, { flow });
    expect(delayed.pause).toMatchObject({ kind: "delay", stepId: "c_wait", afterMs: 60_000 });
    expect(delayed.steps).toHaveLength(1);
  });

  it("reruns a step: its own exports are not kept, its context and maxReruns are, 10 by default", async () => {
    const result = await run(
      {
        start: { run: () => ({ job: 1 }) },
        poll: {
          run({ $ }: { $: Dollar }) {
            $.export("partial", true);
            $.flow.rerun(2000, { jobId: "j_1", when: new Date(0) });
            return "not yet";
          },
        },
        after,
      },
      { flow },
    );
    expect(result.pause).toEqual({
      kind: "rerun",
      stepId: "c_poll",
      afterMs: 2000,
      context: { jobId: "j_1", when: "1970-01-01T00:00:00.000Z" },
      maxReruns: 10,
      steps: { start: { $return_value: { job: 1 } } },
    });
  });

  it("goes on to the next step when a rerun would pass maxReruns (run 4 of at most 3 reruns)", async () => {
    const rerunning = { run: ({ $ }: { $: Dollar }) => void $.flow.rerun(1000, null, 3) };
    const third = await run({ poll: rerunning, after }, { flow, rerun: { runs: 3, context: null } });
    expect(third.pause).toMatchObject({ kind: "rerun", maxReruns: 3 });
    const past = await run({ poll: rerunning, after }, { flow, rerun: { runs: 4, context: null } });
    expect(past.pause).toBeUndefined();
    expect(past.steps.map((step) => step.status)).toEqual(["success", "success"]);
  });

  it("gives a rerun's count, context and callback to the rerun step only, not to the steps after it", async () => {
    const seen = (name: string) =>
      probe((_steps, $) => ({ name, run: ($ as unknown as { context: { run: unknown } }).context.run }));
    const result = await run(
      { poll: seen("poll"), next: seen("next") },
      { flow, rerun: { runs: 4, context: { jobId: "j" }, callback_request: { body: { ok: 1 } } } },
    );
    expect(emitted(result)).toEqual([
      {
        name: "poll",
        run: { runs: 4, retry_count: 0, context: { jobId: "j" }, callback_request: { body: { ok: 1 } } },
      },
      { name: "next", run: { runs: 1, retry_count: 0 } },
    ]);
    // The step after a rerun step starts its own reruns at 1 (it may rerun 3 times: this is its first).
    const later = await run(
      { poll: { run: () => "done" }, next: { run: ({ $ }: { $: Dollar }) => void $.flow.rerun(10, null, 3) } },
      { flow, rerun: { runs: 11, context: null } },
    );
    expect(later.pause).toMatchObject({ kind: "rerun", stepId: "c_next" });
  });

  it.each([
    ["a negative delay", ($: Dollar) => $.flow.delay(-1), "TypeError", "0 or more"],
    ["a delay that is no number", ($: Dollar) => $.flow.delay("10s"), "TypeError", "milliseconds"],
    ["no delay", ($: Dollar) => $.flow.delay(), "TypeError", "milliseconds"],
    ["a pause over 365 days", ($: Dollar) => $.flow.suspend(366 * 24 * 3600 * 1000), "RangeError", "365 days"],
    ["a fractional maxReruns", ($: Dollar) => $.flow.rerun(1000, null, 1.5), "TypeError", "maxReruns"],
    ["too many reruns", ($: Dollar) => $.flow.rerun(1000, null, 10_001), "TypeError", "maxReruns"],
  ])("fails the step on %s, and does not pause", async (_case, call, name, text) => {
    const result = await run({ bad: { run: ({ $ }: { $: Dollar }) => call($) }, after }, { flow });
    expect(result.steps[0]).toMatchObject({ status: "error", error: { name } });
    expect(result.steps[0]?.error?.message).toContain(text);
    expect(result.pause).toBeUndefined();
  });

  it("does not pause a step that fails or exits after asking to", async () => {
    const failed = await run(
      {
        ask: {
          run({ $ }: { $: Dollar }) {
            $.flow.suspend();
            throw new Error("no approver");
          },
        },
      },
      { flow },
    );
    expect(failed.pause).toBeUndefined();
    expect(failed.steps[0]).toMatchObject({ status: "error", error: { message: "no approver" } });
    const exited = await run(
      {
        ask: {
          run({ $ }: { $: Dollar }) {
            $.flow.delay(1000);
            $.flow.exit("nothing to wait for");
          },
        },
      },
      { flow },
    );
    expect(exited.pause).toBeUndefined();
    expect(exited.steps[0]?.status).toBe("exited");
  });

  it("says why a run without pause URLs cannot pause: a custom-response run answers its caller", async () => {
    const plain = await run({ ask: { run: ({ $ }: { $: Dollar }) => $.flow.suspend() } });
    expect(plain.steps[0]?.error).toMatchObject({
      name: "NotImplementedError",
      message: "$.flow.suspend: this run cannot pause",
    });
    const responding = await run({ ask: { run: ({ $ }: { $: Dollar }) => $.flow.delay(5) } }, { respondable: true });
    expect(responding.steps[0]?.error?.message).toContain("custom_response");
  });

  it("fails the pausing step with PauseError when what the run would keep is over 256 KiB", async () => {
    const result = await run(
      {
        big: { run: () => "x".repeat(300 * 1024) },
        ask: { run: ({ $ }: { $: Dollar }) => void $.flow.suspend() },
      },
      { flow },
    );
    expect(result.pause).toBeUndefined();
    expect(result.steps[1]).toMatchObject({ status: "error", error: { name: "PauseError" } });
    expect(result.steps[1]?.error?.message).toContain("export less before pausing");
  });

  it("resumes with the earlier steps' exports as the pause kept them, __proto__ included as data", async () => {
    const kept = JSON.parse('{"ask":{"$return_value":"asked","$resume_data":{"ok":true}},"__proto__":{"x":1}}');
    const result = await run(
      { after: probe((steps) => ({ ask: steps.ask, proto: Object.hasOwn(steps, "__proto__") })) },
      { flow, resume: { steps: kept } },
    );
    expect(emitted(result)).toEqual([{ ask: { $return_value: "asked", $resume_data: { ok: true } }, proto: true }]);
  });
});

describe("runWorkflowSteps: an action run on its own (standalone)", () => {
  const action: Component = {
    props: { name: { type: "string" } },
    async run({ $ }: { $: Dollar }) {
      $.export("$summary", "greeted");
      $.export("__proto__", { kept: true });
      return { hello: "ada" };
    },
  };

  it("carries the step's return value and exports back as values, __proto__ as data", async () => {
    const result = await run({ action }, { standalone: true });
    expect(result.steps[0]?.status).toBe("success");
    const values = result.values?.action as Record<string, unknown>;
    expect(values.$return_value).toEqual({ hello: "ada" });
    expect(values.$summary).toBe("greeted");
    expect(Object.getOwnPropertyDescriptor(values, "__proto__")?.value).toEqual({ kept: true });
    // A run of a workflow carries none: its values stay in the runtime.
    expect((await run({ action })).values).toBeUndefined();
  });

  it("keeps a failed step's exports, and refuses $.send.* and the pausing $.flow helpers", async () => {
    const failing = await run(
      {
        action: {
          async run({ $ }: { $: Dollar }) {
            $.export("before", 1);
            throw new Error("boom");
          },
        },
      },
      { standalone: true },
    );
    expect(failing.steps[0]?.error?.message).toBe("boom");
    expect(failing.values).toEqual({ action: { before: 1 } });
    for (const call of [
      ($: Dollar) => $.send.http({ method: "GET", url: "https://example.test" }),
      ($: Dollar) => $.send.emit({ raw_event: {} }),
      ($: Dollar) => $.flow.suspend(),
      ($: Dollar) => $.flow.rerun(1000),
    ]) {
      const refused = await run({ action: { run: ({ $ }: { $: Dollar }) => call($) } }, { standalone: true });
      expect(refused.steps[0]?.error).toMatchObject({
        name: "NotImplementedError",
        message: expect.stringContaining("an action run on its own (the Connect run action) cannot send or pause"),
      });
      expect(refused.sends).toEqual([]);
      expect(refused.pause).toBeUndefined();
    }
  });
});
