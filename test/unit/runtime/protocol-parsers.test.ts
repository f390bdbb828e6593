import { describe, expect, it } from "vitest";
import { MAX_JSON_VALUE_DEPTH } from "#runtime/json-value";
import type { Invocation, InvocationResult, WorkflowInvocation, WorkflowResult } from "#runtime/protocol";
import { dataStoreKeyProblem } from "#runtime/protocol";
import {
  MALFORMED_RESULT_ERROR,
  malformedError,
  parseDescribeReply,
  parseHttpResponse,
  parseInvocation,
  parseInvocationResult,
  parseWorkflowInvocation,
  parseWorkflowResult,
} from "#runtime/protocol-parsers";

const invocation: Invocation = {
  invocationId: "inv-1",
  kind: "run",
  sourceId: "dc_1",
  props: { greeting: "hi" },
  propTypes: { greeting: "string" },
  db: { cursor: 3 },
  event: { n: 1 },
  timeoutMs: 1000,
  limits: { maxEmits: 10, maxEmitBytes: 1000 },
};

const result: InvocationResult = {
  invocationId: "inv-1",
  emits: [{ event: { a: 1 }, meta: { id: "e1", name: "ch", summary: "s", ts: 5, delivery_ts: 6 } }],
  dbWrites: { cursor: 4, gone: null },
  logs: [{ ts: 1, level: "warn", message: "careful" }],
  error: { name: "Error", message: "boom", stack: "Error: boom\n    at component.ts:3:7", ts: 2 },
  response: { status: 201, headers: { "content-type": "text/plain" }, body: "aGk=", bodyEncoding: "base64" },
  additionalProps: [{ name: "q", type: "string", label: "Q", optional: true, default: "x", options: ["x", "y"] }],
  durationMs: 12.5,
};

/** `value` with the field at `path` (dot-separated, numbers index arrays) replaced by `replacement`. */
function withField(value: unknown, path: string, replacement: unknown): unknown {
  const copy = structuredClone(value) as Record<string, unknown>;
  const keys = path.split(".");
  let target: Record<string, unknown> = copy;
  for (const key of keys.slice(0, -1)) target = target[key] as Record<string, unknown>;
  const last = keys.at(-1) as string;
  if (replacement === undefined) delete target[last];
  else target[last] = replacement;
  return copy;
}

describe("parseInvocationResult: the result a runtime sends", () => {
  it("takes what the runtime builds, unchanged", () => {
    expect(parseInvocationResult(structuredClone(result), "inv-1")).toEqual({ ok: true, value: result });
    const bare = { invocationId: "inv-1", emits: [], dbWrites: {}, logs: [], durationMs: 0 };
    expect(parseInvocationResult(bare, "inv-1")).toEqual({ ok: true, value: bare });
  });

  it("leaves out keys the protocol does not name, at the top and in an emit's options", () => {
    const extra = { ...structuredClone(result), extra: 1 };
    (extra.emits[0]!.meta as Record<string, unknown>).unknown = "x";
    const parsed = parseInvocationResult(extra, "inv-1");
    expect(parsed).toEqual({ ok: true, value: result });
  });

  it("hands JSON values on as they are: a __proto__ key of an event or a db write stays data", () => {
    const raw = JSON.parse(
      JSON.stringify(result)
        .replace('"event":{"a":1}', '"event":{"a":1,"__proto__":{"x":1}}')
        .replace('"dbWrites":{', '"dbWrites":{"__proto__":{"y":2},'),
    );
    const parsed = parseInvocationResult(raw, "inv-1");
    if (!parsed.ok) throw new Error(parsed.problem);
    expect(Object.getOwnPropertyDescriptor(parsed.value.emits[0]?.event, "__proto__")?.value).toEqual({ x: 1 });
    expect(Object.getOwnPropertyDescriptor(parsed.value.dbWrites, "__proto__")?.value).toEqual({ y: 2 });
    expect(Object.getPrototypeOf(parsed.value.dbWrites)).toBe(Object.prototype);
  });

  it.each([
    ["a result that is not an object", null, "the result must be an object"],
    ["another invocation's id", withField(result, "invocationId", "inv-2"), "invocationId must be the invocation's id"],
    ["emits that are not an array", withField(result, "emits", { 0: 1 }), "emits must be an array"],
    ["an emit that is not an object", withField(result, "emits", ["forged"]), "emits[0] must be an object"],
    ["an emit without its event", withField(result, "emits.0.event", undefined), "emits[0].event must be present"],
    ["an emit without options", withField(result, "emits.0.meta", undefined), "emits[0].meta must be an object"],
    ["an emit whose id is an object", withField(result, "emits.0.meta.id", { x: 1 }), "emits[0].meta.id must be"],
    ["an emit whose ts is a string", withField(result, "emits.0.meta.ts", "5"), "emits[0].meta.ts must be a finite"],
    ["an emit whose name is a number", withField(result, "emits.0.meta.name", 5), "emits[0].meta.name must be a str"],
    ["an event that is not JSON", withField(result, "emits.0.event", { f: Number.NaN }), "emits[0].event must be JSON"],
    ["db writes that are an array", withField(result, "dbWrites", [1]), "dbWrites must be an object"],
    ["db writes that are not JSON", withField(result, "dbWrites", { d: new Date(0) }), "dbWrites must be JSON"],
    ["logs that are not an array", withField(result, "logs", "log"), "logs must be an array"],
    ["a log of an unknown level", withField(result, "logs.0.level", "shout"), "logs[0].level must be one of log,"],
    ["a log without a message", withField(result, "logs.0.message", undefined), "logs[0].message must be a string"],
    ["an error that is not an object", withField(result, "error", "boom"), "error must be an object"],
    ["an error whose name is a number", withField(result, "error.name", 5), "error.name must be a string"],
    ["an error without a time", withField(result, "error.ts", undefined), "error.ts must be a finite number"],
    ["a response with a status below 200", withField(result, "response.status", 42), "response.status must be an"],
    ["a response with a status as text", withField(result, "response.status", "200"), "response.status must be an"],
    ["a response whose headers are a list", withField(result, "response.headers", ["a"]), "response.headers must be"],
    ["a header that is a number", withField(result, "response.headers", { a: 1 }), "response.headers.a must be a s"],
    ["a response with an object body", withField(result, "response.body", { a: 1 }), "response.body must be a str"],
    ["an unknown body encoding", withField(result, "response.bodyEncoding", "hex"), "response.bodyEncoding must be"],
    ["a prop without a type", withField(result, "additionalProps.0.type", undefined), "additionalProps[0].type must"],
    ["a prop whose optional is text", withField(result, "additionalProps.0.optional", "yes"), "additionalProps[0].op"],
    ["a duration that is text", withField(result, "durationMs", "slow"), "durationMs must be a finite number"],
  ])("refuses %s, saying which field", (_what, raw, problem) => {
    const parsed = parseInvocationResult(raw, "inv-1");
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? "" : parsed.problem).toContain(problem);
  });

  it("keeps the problem short when the sender's key is long", () => {
    const parsed = parseInvocationResult(withField(result, "response.headers", { ["h".repeat(100_000)]: 1 }), "inv-1");
    expect(parsed.ok ? "" : parsed.problem).toHaveLength(
      `response.headers.${"h".repeat(64)}... must be a string`.length,
    );
  });

  it("walks a large array without overflowing the stack", () => {
    const many = Array.from({ length: 1_000_000 }, () => 0);
    const parsed = parseInvocationResult({ ...result, dbWrites: { many } }, "inv-1");
    expect(parsed.ok).toBe(true);
  });

  it("refuses JSON nested deeper than trusted code can serialise: an emit or a db value 100,000 deep", () => {
    // 200 KB of brackets, under every size limit: `JSON.stringify` of it overflowed the server's stack.
    const deep = JSON.parse(`${"[".repeat(100_000)}${"]".repeat(100_000)}`);
    for (const forged of [
      { ...result, emits: [{ event: deep, meta: {} }] },
      { ...result, dbWrites: { deep } },
    ]) {
      const parsed = parseInvocationResult(forged, "inv-1");
      expect(parsed.ok).toBe(false);
      expect(parsed.ok ? "" : parsed.problem).toMatch(/must be JSON/);
    }
    const nested = (depth: number) => JSON.parse(`${"[".repeat(depth)}${"]".repeat(depth)}`);
    expect(parseInvocationResult({ ...result, dbWrites: { ok: nested(MAX_JSON_VALUE_DEPTH - 1) } }, "inv-1").ok).toBe(
      true,
    );
    expect(parseInvocationResult({ ...result, dbWrites: { no: nested(MAX_JSON_VALUE_DEPTH + 1) } }, "inv-1").ok).toBe(
      false,
    );
  });
});

describe("parseHttpResponse: a respond message's response", () => {
  it("takes the normal form and refuses anything else", () => {
    expect(parseHttpResponse({ status: 200, headers: {}, body: "" })).toEqual({
      ok: true,
      value: { status: 200, headers: {}, body: "" },
    });
    expect(parseHttpResponse({ status: 200, body: "" })).toEqual({
      ok: false,
      problem: "response.headers must be an object",
    });
    expect(parseHttpResponse({ status: 600, headers: {}, body: "" })).toMatchObject({ ok: false });
  });

  it("keeps the cookies, each a string", () => {
    expect(parseHttpResponse({ status: 200, headers: {}, cookies: ["a=1", "b=2"], body: "" })).toEqual({
      ok: true,
      value: { status: 200, headers: {}, cookies: ["a=1", "b=2"], body: "" },
    });
    expect(parseHttpResponse({ status: 200, headers: {}, cookies: "a=1", body: "" })).toMatchObject({ ok: false });
    expect(parseHttpResponse({ status: 200, headers: {}, cookies: ["a=1", 2], body: "" })).toEqual({
      ok: false,
      problem: "response.cookies.1 must be a string",
    });
  });
});

describe("parseInvocation: what both entries take from the host", () => {
  it("takes an invocation as trusted code builds it", () => {
    expect(parseInvocation(structuredClone(invocation))).toEqual({ ok: true, value: invocation });
  });

  it.each([
    [{ hello: "world" }, "invocationId must be a string"],
    [withField(invocation, "invocationId", ""), "invocationId must be a non-empty string"],
    [
      withField(invocation, "kind", "explode"),
      "kind must be one of run, deploy, activate, deactivate, additionalProps, propOptions",
    ],
    [withField(invocation, "props", []), "props must be an object"],
    [withField(invocation, "propTypes", { a: 1 }), "propTypes.a must be a string"],
    [withField(invocation, "timeoutMs", 0), "timeoutMs must be a positive number"],
    [withField(invocation, "limits", { maxEmits: "10" }), "limits.maxEmits must be a finite number"],
  ])("refuses %j", (raw, problem) => {
    expect(parseInvocation(raw)).toEqual({ ok: false, problem });
  });
});

describe("parseDescribeReply: the answer to a describe", () => {
  const description = {
    name: "x",
    type: "source",
    hooks: ["deploy"],
    methods: ["m"],
    hasRun: true,
    hasAdditionalProps: false,
    props: [{ name: "db", type: "$.service.db" }],
  };

  it("takes a description and a load failure", () => {
    expect(parseDescribeReply({ ok: true, description })).toEqual({ ok: true, value: { ok: true, description } });
    const failure = { ok: false, error: { message: "boom", line: 3, column: 9 } };
    expect(parseDescribeReply(failure)).toEqual({ ok: true, value: failure });
  });

  it.each([
    [{ ok: "yes" }, "ok must be a boolean"],
    [{ ok: true, description: { ...description, type: "workflow" } }, "description.type must be one of source, action"],
    [{ ok: true, description: { ...description, hooks: ["explode"] } }, "description.hooks[0] must be one of"],
    [{ ok: true, description: { ...description, props: [{ name: "p" }] } }, "description.props[0].type must be a"],
    [{ ok: false, error: { message: "m", line: 1.5 } }, "error.line must be an integer"],
  ])("refuses %j", (raw, problem) => {
    const parsed = parseDescribeReply(raw);
    expect(parsed.ok ? "" : parsed.problem).toContain(problem);
  });
});

describe("malformedError", () => {
  it("names the message and the problem, and says nothing was applied", () => {
    expect(malformedError("result", "logs must be an array", 7)).toEqual({
      name: MALFORMED_RESULT_ERROR,
      message: "the component's runtime sent a malformed result (logs must be an array); nothing of it was applied",
      ts: 7,
    });
  });
});

const workflowInvocation: WorkflowInvocation = {
  invocationId: "inv-w",
  kind: "workflow",
  workflowId: "p_1",
  trigger: { event: { body: { a: 1 } }, context: { source_type: "HTTP" } },
  context: { id: "run_1", run: { runs: 1, retry_count: 0 } },
  steps: [
    { id: "c_1", namespace: "parse", module: "hash1", props: {}, propTypes: {}, db: {} },
    { id: "c_2", namespace: "send", module: "hash2", props: { url: "u" }, propTypes: { url: "string" }, db: { n: 1 } },
  ],
  respondable: true,
  timeoutMs: 1000,
  limits: { maxEmits: 10, maxEmitBytes: 1000, maxSends: 5, maxSendBytes: 2000, maxExportBytes: 3000 },
};

describe("parseWorkflowInvocation: a workflow run as the entries take it", () => {
  it("takes a workflow invocation as trusted code builds it", () => {
    expect(parseWorkflowInvocation(structuredClone(workflowInvocation))).toEqual({
      ok: true,
      value: workflowInvocation,
    });
  });

  it("takes a trigger without its own context (trusted code sends the run's context once)", () => {
    const once = { ...structuredClone(workflowInvocation), trigger: { event: { body: { a: 1 } } } };
    expect(parseWorkflowInvocation(structuredClone(once))).toEqual({ ok: true, value: once });
  });

  it("takes the props a step's expressions are in", () => {
    const named = withField(workflowInvocation, "steps.1.expressions", ["url"]);
    expect(parseWorkflowInvocation(structuredClone(named))).toEqual({ ok: true, value: named });
  });

  it.each([
    [
      "expressions that are not a list",
      withField(workflowInvocation, "steps.1.expressions", "url"),
      "steps[1].expressions must be an array",
    ],
    [
      "an expression prop that is not text",
      withField(workflowInvocation, "steps.1.expressions", [1]),
      "steps[1].expressions[0] must be a string",
    ],
    ["a source's invocation", invocation, "kind must be workflow"],
    ["another kind", withField(workflowInvocation, "kind", "run"), "kind must be workflow"],
    ["no trigger event", withField(workflowInvocation, "trigger.event", undefined), "trigger.event must be present"],
    ["a context that is not JSON", withField(workflowInvocation, "context", { f: () => 1 }), "context must be JSON"],
    ["steps that are not an array", withField(workflowInvocation, "steps", {}), "steps must be an array"],
    ["a step without a module", withField(workflowInvocation, "steps.1.module", ""), "steps[1].module must be a non"],
    ["a step named trigger", withField(workflowInvocation, "steps.0.namespace", "trigger"), "steps[0].namespace must"],
    ["two steps of one namespace", withField(workflowInvocation, "steps.1.namespace", "parse"), "steps[1].namespace"],
    [
      "a prop type that is not text",
      withField(workflowInvocation, "steps.1.propTypes.url", 1),
      "steps[1].propTypes.url",
    ],
    ["a db that is not JSON", withField(workflowInvocation, "steps.1.db", { d: new Date(0) }), "steps[1].db must be"],
    ["respondable as text", withField(workflowInvocation, "respondable", "yes"), "respondable must be a boolean"],
    ["a missing limit", withField(workflowInvocation, "limits.maxExportBytes", undefined), "limits.maxExportBytes"],
    ["no time limit", withField(workflowInvocation, "timeoutMs", 0), "timeoutMs must be a positive number"],
  ])("refuses %s", (_what, raw, problem) => {
    const parsed = parseWorkflowInvocation(raw);
    expect(parsed.ok ? "" : parsed.problem).toContain(problem);
  });

  it("is refused by the source parser, so a source entry never runs it as a source", () => {
    expect(parseInvocation(structuredClone(workflowInvocation))).toMatchObject({ ok: false });
  });
});

const workflowResult: WorkflowResult = {
  invocationId: "inv-w",
  steps: [
    { id: "c_1", status: "success", summary: "parsed", exportBytes: 12, dbWrites: {}, durationMs: 1 },
    {
      id: "c_2",
      status: "error",
      exportBytes: 0,
      dbWrites: { n: 2 },
      durationMs: 2,
      error: { name: "TypeError", message: "no", ts: 3 },
    },
  ],
  sends: [
    {
      type: "http",
      method: "POST",
      url: "https://example.com",
      headers: { a: "b" },
      params: { q: "1" },
      auth: { username: "u", password: "p" },
      data: { x: [1] },
    },
    { type: "emit", raw_event: null },
    { type: "sse", channel: "c", payload: "p" },
    { type: "s3", bucket: "b", prefix: "p/", payload: { k: 1 } },
  ],
  logs: [{ ts: 1, level: "info", message: "hi", step: "c_1" }],
  response: { status: 201, headers: {}, body: "ok", immediate: true },
  durationMs: 4,
};

describe("parseWorkflowResult: the result of a workflow run", () => {
  it("takes what the runtime builds, unchanged, and leaves out keys the protocol does not name", () => {
    expect(parseWorkflowResult(structuredClone(workflowResult), "inv-w")).toEqual({ ok: true, value: workflowResult });
    const extra = structuredClone(workflowResult) as unknown as Record<string, unknown>;
    extra.exports = { huge: "forged" };
    (extra.steps as Record<string, unknown>[])[0]!.$return_value = "forged";
    expect(parseWorkflowResult(extra, "inv-w")).toEqual({ ok: true, value: workflowResult });
    const ended = {
      invocationId: "inv-w",
      steps: [],
      sends: [],
      logs: [],
      durationMs: 0,
      error: { name: "TimeoutError", message: "t", ts: 1 },
    };
    expect(parseWorkflowResult(ended, "inv-w")).toEqual({ ok: true, value: ended });
  });

  // A sandbox child may send anything: each forged field fails the whole result.
  it.each([
    ["another invocation's id", withField(workflowResult, "invocationId", "inv-x"), "invocationId must be"],
    ["steps that are not an array", withField(workflowResult, "steps", "all fine"), "steps must be an array"],
    [
      "a step of an unknown status",
      withField(workflowResult, "steps.0.status", "skipped"),
      "steps[0].status must be one",
    ],
    [
      "a failed step without its error",
      withField(workflowResult, "steps.1.error", undefined),
      "steps[1].error must be pres",
    ],
    [
      "a successful step with an error",
      withField(workflowResult, "steps.0.error", { name: "E", message: "m", ts: 1 }),
      "steps[0].error",
    ],
    [
      "an exit reason on a success",
      withField(workflowResult, "steps.0.exitReason", "r"),
      "steps[0].exitReason must be absent",
    ],
    ["negative export bytes", withField(workflowResult, "steps.0.exportBytes", -1), "steps[0].exportBytes must be"],
    ["export bytes as text", withField(workflowResult, "steps.0.exportBytes", "12"), "steps[0].exportBytes must be"],
    ["a step without an id", withField(workflowResult, "steps.0.id", ""), "steps[0].id must be a non-empty"],
    [
      "db writes that are not JSON",
      withField(workflowResult, "steps.1.dbWrites", { n: Number.NaN }),
      "steps[1].dbWrites",
    ],
    ["a summary that is not text", withField(workflowResult, "steps.0.summary", { s: 1 }), "steps[0].summary must be"],
    ["a send of an unknown type", withField(workflowResult, "sends.0.type", "email"), "sends[0].type must be one of"],
    [
      "an http send without a url",
      withField(workflowResult, "sends.0.url", undefined),
      "sends[0].url must be a string",
    ],
    [
      "a header that is a number",
      withField(workflowResult, "sends.0.headers.a", 1),
      "sends[0].headers.a must be a str",
    ],
    [
      "auth without a password",
      withField(workflowResult, "sends.0.auth.password", undefined),
      "sends[0].auth.password",
    ],
    [
      "data that is not JSON",
      withField(workflowResult, "sends.0.data", { d: new Date(0) }),
      "sends[0].data must be JSON",
    ],
    ["an emit without raw_event", withField(workflowResult, "sends.1.raw_event", undefined), "sends[1].raw_event must"],
    ["an sse without a channel", withField(workflowResult, "sends.2.channel", undefined), "sends[2].channel must be"],
    ["an s3 without a prefix", withField(workflowResult, "sends.3.prefix", undefined), "sends[3].prefix must be"],
    ["a log without its step", withField(workflowResult, "logs.0.step", undefined), "logs[0].step must be a string"],
    ["a response with a bad status", withField(workflowResult, "response.status", 99), "response.status must be"],
    ["immediate as text", withField(workflowResult, "response.immediate", "yes"), "response.immediate must be a bool"],
    ["a run error without a time", withField(workflowResult, "error", { name: "E", message: "m" }), "error.ts must be"],
  ])("refuses %s, saying which field", (_what, raw, problem) => {
    const parsed = parseWorkflowResult(raw, "inv-w");
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? "" : parsed.problem).toContain(problem);
  });

  it("hands a __proto__ key of a send's payload on as data", () => {
    const raw = JSON.parse(
      JSON.stringify(workflowResult).replace('"payload":{"k":1}', '"payload":{"__proto__":{"x":1}}'),
    );
    const parsed = parseWorkflowResult(raw, "inv-w");
    if (!parsed.ok) throw new Error(parsed.problem);
    const send = parsed.value.sends[3] as { payload: object };
    expect(Object.getOwnPropertyDescriptor(send.payload, "__proto__")?.value).toEqual({ x: 1 });
  });
});

describe("dataStoreKeyProblem", () => {
  it("refuses a key with a lone surrogate, which has no UTF-8, and takes a pair", () => {
    for (const key of ["\ud800", "a\udbffb", "\udc00"]) expect(dataStoreKeyProblem(key)).toMatch(/well-formed/);
    expect(dataStoreKeyProblem("😀 ok")).toBeUndefined();
    expect(dataStoreKeyProblem("")).toBeUndefined();
  });
});
