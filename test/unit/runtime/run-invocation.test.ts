import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { RESPONSE_MAX_BODY_BYTES, RESPONSE_MAX_HEADERS } from "#runtime/http-response";
import type { HttpResponseSpec, Invocation } from "#runtime/protocol";
import {
  DB_MAX_BYTES,
  failCurrentInvocation,
  LOG_MAX_BYTES,
  normalizeResponse,
  runInvocation,
  STATUS_MESSAGE,
} from "#runtime/run-invocation";

let counter = 0;

function invocation(overrides: Partial<Invocation> = {}): Invocation {
  counter += 1;
  return {
    invocationId: `inv_${counter}`,
    kind: "run",
    sourceId: "dc_test",
    props: {},
    propTypes: {},
    db: {},
    timeoutMs: 5000,
    ...overrides,
  };
}

const noIo = { onRespond() {} };

/** Resolves after `ms` of the event loop; used only to interleave two invocations. */
const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("runInvocation: this", () => {
  it("exposes props as this.<name> and binds methods and app methods", async () => {
    const component = {
      props: {
        greeting: "string",
        github: {
          type: "app",
          app: "github",
          methods: {
            token(this: { $auth: { oauth_access_token: string } }) {
              return this.$auth.oauth_access_token;
            },
          },
        },
      },
      methods: {
        shout(this: { greeting: string }) {
          return this.greeting.toUpperCase();
        },
      },
      async run(this: any, event: unknown) {
        this.$emit({
          greeting: this.greeting,
          shout: this.shout(),
          token: this.github.token(),
          timer: this.timer,
          endpoint: this.http.endpoint,
          event,
        });
      },
    };
    const result = await runInvocation(
      component,
      invocation({
        props: {
          greeting: "hello",
          github: { $auth: { oauth_access_token: "tok" } },
          timer: { type: "$.interface.timer", intervalSeconds: 60 },
          http: { endpoint: "https://example.test/abc", customResponse: false },
        },
        propTypes: { greeting: "string", github: "app", timer: "$.interface.timer", http: "$.interface.http" },
        event: { n: 1 },
      }),
      noIo,
    );
    expect(result.error).toBeUndefined();
    expect(result.emits).toEqual([
      {
        event: {
          greeting: "hello",
          shout: "HELLO",
          token: "tok",
          timer: { type: "$.interface.timer", intervalSeconds: 60 },
          endpoint: "https://example.test/abc",
          event: { n: 1 },
        },
        meta: {},
      },
    ]);
  });

  it("gives an app prop an empty $auth when none is configured", async () => {
    const result = await runInvocation(
      {
        props: { slack: { type: "app", app: "slack" } },
        run(this: any) {
          this.$emit({ auth: this.slack.$auth });
        },
      },
      invocation({ props: { slack: {} }, propTypes: { slack: "app" } }),
      noIo,
    );
    expect(result.emits[0]?.event).toEqual({ auth: {} });
  });

  it("gives an app prop with no configured value its methods and an empty $auth", async () => {
    const result = await runInvocation(
      {
        props: {
          helpers: {
            type: "app",
            app: "helpers",
            methods: {
              keys(this: { $auth: object }) {
                return Object.keys(this.$auth);
              },
            },
          },
        },
        run(this: any) {
          this.$emit({ keys: this.helpers.keys(), auth: this.helpers.$auth });
        },
      },
      invocation({ props: {}, propTypes: { helpers: "app" } }),
      noIo,
    );
    expect(result.error).toBeUndefined();
    expect(result.emits[0]?.event).toEqual({ keys: [], auth: {} });
  });

  it("builds this afresh for every invocation", async () => {
    const component = {
      run(this: any) {
        this.$emit({ seen: this.leftover ?? null });
        this.leftover = "from an earlier run";
      },
    };
    await runInvocation(component, invocation(), noIo);
    const second = await runInvocation(component, invocation(), noIo);
    expect(second.emits[0]?.event).toEqual({ seen: null });
  });

  it("reports a module that exports no component object", async () => {
    const result = await runInvocation(undefined, invocation(), noIo);
    expect(result.error?.name).toBe("TypeError");
    expect(result.error?.message).toContain("component object");
  });
});

describe("runInvocation: $emit", () => {
  it("records events in order with valid metadata and ignores fields of the wrong type", async () => {
    let returned: unknown;
    const result = await runInvocation(
      {
        run(this: any) {
          returned = this.$emit({ a: 1, fn() {} }, { id: "x1", name: "chan", summary: "first", ts: 1700000000000 });
          this.$emit({ b: new Date(0) }, { id: 7, delivery_ts: 1700000001000 });
          this.$emit("plain", { id: { nested: true }, name: 5, summary: null, ts: Number.NaN, extra: "kept out" });
          this.$emit();
        },
      },
      invocation(),
      noIo,
    );
    expect(returned).toBeInstanceOf(Promise);
    expect(result.emits).toEqual([
      { event: { a: 1 }, meta: { id: "x1", name: "chan", summary: "first", ts: 1700000000000 } },
      { event: { b: "1970-01-01T00:00:00.000Z" }, meta: { id: 7, delivery_ts: 1700000001000 } },
      { event: "plain", meta: {} },
      { event: null, meta: {} },
    ]);
  });
});

describe("runInvocation: a source without run", () => {
  it("emits the event of its run as it is, and nothing for a hook", async () => {
    const component = { props: { timer: { type: "$.interface.timer" } } };
    const tick = { timestamp: 1700000000, interval_seconds: 900 };
    const run = await runInvocation(component, invocation({ event: tick }), noIo);
    expect(run.error).toBeUndefined();
    expect(run.emits).toEqual([{ event: tick, meta: {} }]);
    const hook = await runInvocation(component, invocation({ kind: "deploy" }), noIo);
    expect(hook.emits).toEqual([]);
  });
});

describe("runInvocation: a __proto__ key", () => {
  it("is data in an emitted event and in a db write, never dropped", async () => {
    const result = await runInvocation(
      {
        props: { db: "$.service.db" },
        run(this: any) {
          const body = JSON.parse('{"__proto__":{"x":1},"n":{"__proto__":[2]}}');
          this.$emit(body);
          this.db.set("__proto__", { y: 3 });
        },
      },
      invocation(),
      noIo,
    );
    const event = result.emits[0]?.event as object;
    expect(Object.getOwnPropertyDescriptor(event, "__proto__")?.value).toEqual({ x: 1 });
    expect(Object.getOwnPropertyDescriptor((event as { n: object }).n, "__proto__")?.value).toEqual([2]);
    expect(Object.getOwnPropertyDescriptor(result.dbWrites, "__proto__")?.value).toEqual({ y: 3 });
    expect(Object.getPrototypeOf(result.dbWrites)).toBe(Object.prototype);
  });
});

describe("runInvocation: $.service.db", () => {
  it("reads the snapshot, returns copies, and records writes", async () => {
    const snapshot = { cursor: { page: 2 }, seen: ["a"] };
    const result = await runInvocation(
      {
        props: { db: "$.service.db" },
        run(this: any) {
          const cursor = this.db.get("cursor");
          cursor.page = 99;
          this.$emit({
            cursor: this.db.get("cursor"),
            missing: this.db.get("missing") === undefined,
          });
          this.db.set("cursor", { page: 3 });
          this.db.set("cleared", undefined);
          this.db.set("seen", [...this.db.get("seen"), "b"]);
          this.$emit({ after: this.db.get("cursor") });
        },
      },
      // Trusted code may leave the db prop out of `props`: it needs no configuration.
      invocation({ db: snapshot }),
      noIo,
    );
    expect(result.error).toBeUndefined();
    expect(result.emits.map((emit) => emit.event)).toEqual([
      { cursor: { page: 2 }, missing: true },
      { after: { page: 3 } },
    ]);
    expect(result.dbWrites).toEqual({ cursor: { page: 3 }, cleared: null, seen: ["a", "b"] });
    expect(snapshot).toEqual({ cursor: { page: 2 }, seen: ["a"] });
  });

  it("rejects values that are not JSON-serialisable, naming the key", async () => {
    const result = await runInvocation(
      {
        props: { db: { type: "$.service.db" } },
        run(this: any) {
          const messages: string[] = [];
          const cycle: Record<string, unknown> = {};
          cycle.self = cycle;
          for (const [key, value] of [
            ["fn", () => 1],
            ["nested", { handler() {} }],
            ["big", 10n],
            ["cycle", cycle],
          ] as const) {
            try {
              this.db.set(key, value);
            } catch (error) {
              messages.push(`${(error as Error).name}: ${(error as Error).message}`);
            }
          }
          this.$emit(messages);
        },
      },
      invocation({ props: { db: { type: "$.service.db" } }, propTypes: { db: "$.service.db" } }),
      noIo,
    );
    const messages = result.emits[0]?.event as string[];
    expect(messages).toHaveLength(4);
    for (const [index, key] of ["fn", "nested", "big", "cycle"].entries()) {
      expect(messages[index]).toMatch(/^TypeError: /);
      expect(messages[index]).toContain(`"${key}"`);
    }
    expect(result.dbWrites).toEqual({});
  });

  it("refuses a write that grows the store past DB_MAX_BYTES, keeping earlier writes", async () => {
    const result = await runInvocation(
      {
        props: { db: "$.service.db" },
        run(this: any) {
          this.db.set("small", "ok");
          this.db.set("huge", "x".repeat(DB_MAX_BYTES));
        },
      },
      invocation({ propTypes: { db: "$.service.db" }, props: { db: { type: "$.service.db" } } }),
      noIo,
    );
    expect(result.error?.name).toBe("RangeError");
    expect(result.error?.message).toContain(String(DB_MAX_BYTES));
    expect(result.dbWrites).toEqual({ small: "ok" });
  });
});

describe("runInvocation: hooks and additionalProps", () => {
  it("runs the hook of the invocation's kind with this", async () => {
    const component = {
      props: { label: "string" },
      hooks: {
        async deploy(this: any) {
          this.$emit({ hook: "deploy", label: this.label });
        },
      },
      async run(this: any) {
        this.$emit({ hook: "run" });
      },
    };
    const deployed = await runInvocation(
      component,
      invocation({ kind: "deploy", props: { label: "L" }, propTypes: { label: "string" } }),
      noIo,
    );
    expect(deployed.emits.map((emit) => emit.event)).toEqual([{ hook: "deploy", label: "L" }]);
    const activated = await runInvocation(component, invocation({ kind: "activate" }), noIo);
    expect(activated).toMatchObject({ emits: [], logs: [] });
    expect(activated.error).toBeUndefined();
  });

  it("describes what additionalProps returns, given the previous definitions", async () => {
    const result = await runInvocation(
      {
        props: { mode: "string" },
        async additionalProps(this: any, previous: Record<string, unknown>) {
          return {
            extra: { type: "integer", label: `for ${this.mode}`, min: 1 },
            previousCount: { type: "string", default: String(Object.keys(previous).length) },
          };
        },
      },
      invocation({
        kind: "additionalProps",
        props: { mode: "fast" },
        propTypes: { mode: "string" },
        event: { old: { type: "string" } },
      }),
      noIo,
    );
    expect(result.error).toBeUndefined();
    expect(result.additionalProps).toEqual([
      { name: "extra", type: "integer", label: "for fast", min: 1 },
      { name: "previousCount", type: "string", default: "1" },
    ]);
  });

  it("returns no additional props when the component has no additionalProps", async () => {
    const result = await runInvocation({}, invocation({ kind: "additionalProps" }), noIo);
    expect(result.additionalProps).toEqual([]);
  });
});

describe("runInvocation: respond", () => {
  const http = {
    props: { http: { endpoint: "https://e.test", customResponse: true } },
    propTypes: { http: "$.interface.http" },
  };

  it("sends the first response at once; later calls are ignored", async () => {
    const responses: HttpResponseSpec[] = [];
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const running = runInvocation(
      {
        async run(this: any) {
          this.http.respond({ status: "201", headers: { "x-n": 5 }, body: { ok: true } });
          this.http.respond({ status: 500, body: "second" });
          await released;
        },
      },
      invocation(http),
      { onRespond: (response) => responses.push(response) },
    );
    // Still running: the response went out before the run ended.
    await expect.poll(() => responses.length).toBe(1);
    release();
    const result = await running;
    const expected = { status: 201, headers: { "x-n": "5", "content-type": "application/json" }, body: '{"ok":true}' };
    expect(responses).toEqual([expected]);
    expect(result.response).toEqual(expected);
  });

  it("throws to the caller on a status outside 200-599 (a 1xx is never a final answer), and a later valid call still answers", async () => {
    const result = await runInvocation(
      {
        run(this: any) {
          const errors: string[] = [];
          for (const status of [100, 101, 199, 600, 200.5, "abc", undefined]) {
            try {
              this.http.respond({ status });
            } catch (error) {
              errors.push((error as Error).message);
            }
          }
          this.$emit(errors);
          this.http.respond({ status: 204 });
        },
      },
      invocation(http),
      noIo,
    );
    expect(result.emits[0]?.event).toEqual(Array(7).fill(STATUS_MESSAGE));
    expect(result.response).toEqual({ status: 204, headers: {}, body: "" });
  });

  it("encodes a Buffer body as base64", async () => {
    const result = await runInvocation(
      {
        run(this: any) {
          this.http.respond({ status: 200, body: Buffer.from([0, 1, 254, 255]) });
        },
      },
      invocation(http),
      noIo,
    );
    expect(result.response).toEqual({ status: 200, headers: {}, body: "AAH+/w==", bodyEncoding: "base64" });
  });

  it("reads a stream body, then answers; a call while it is read is ignored", async () => {
    const responses: HttpResponseSpec[] = [];
    const result = await runInvocation(
      {
        async run(this: any) {
          const streamed = this.http.respond({ status: 200, body: Readable.from(["chunk 1, ", "chunk 2"]) });
          this.http.respond({ status: 500, body: "second" });
          await streamed;
        },
      },
      invocation(http),
      { onRespond: (response) => responses.push(response) },
    );
    const expected = {
      status: 200,
      headers: {},
      body: Buffer.from("chunk 1, chunk 2").toString("base64"),
      bodyEncoding: "base64",
    };
    expect(responses).toEqual([expected]);
    expect(result.response).toEqual(expected);
  });

  it("is not callable from a hook", async () => {
    const result = await runInvocation(
      {
        hooks: {
          activate(this: any) {
            this.http.respond({ status: 200 });
          },
        },
      },
      invocation({ ...http, kind: "activate" }),
      noIo,
    );
    expect(result.error?.message).toBe("respond can only be called from run");
    expect(result.response).toBeUndefined();
  });
});

describe("normalizeResponse", () => {
  it("keeps a content type the code set and stringifies header values", () => {
    expect(
      normalizeResponse({ status: 200, headers: { "Content-Type": "text/plain", a: ["1", "2"], b: null }, body: [1] }),
    ).toEqual({ status: 200, headers: { "Content-Type": "text/plain", a: "1, 2" }, body: "[1]" });
  });

  it("is idempotent, so trusted code can check what a runtime sent", () => {
    const once = normalizeResponse({ status: "404", body: new Uint8Array([104, 105]) });
    expect(normalizeResponse(once)).toEqual(once);
  });

  it("rejects a non-object", () => {
    expect(() => normalizeResponse("200")).toThrow(TypeError);
  });

  it("keeps each Set-Cookie value apart, under any spelling, and drops those HTTP cannot carry", () => {
    const expires = "a=1; Expires=Wed, 21 Oct 2026 07:28:00 GMT; Path=/";
    const response = normalizeResponse({
      status: 200,
      headers: { "Set-Cookie": [expires, "b=2", "c=3\r\nx-injected: 1"], "set-cookie": "d=4", "x-other": ["p", "q"] },
      body: "ok",
    });
    expect(response.headers).toEqual({ "x-other": "p, q" });
    expect(response.cookies).toEqual([expires, "b=2", "d=4"]);
    // Read again by trusted code, the cookies stay as they are: none joined, none lost.
    expect(normalizeResponse(response)).toEqual(response);
    expect(normalizeResponse({ status: 200, headers: { "x-a": "1" } })).not.toHaveProperty("cookies");
  });

  it("counts each cookie as a header against the limits", () => {
    const cookies = Array.from({ length: RESPONSE_MAX_HEADERS }, (_, n) => `c${n}=1`);
    expect(normalizeResponse({ status: 200, headers: { "set-cookie": cookies } }).cookies).toHaveLength(
      RESPONSE_MAX_HEADERS,
    );
    expect(() => normalizeResponse({ status: 200, headers: { "set-cookie": cookies, "x-one": "more" } })).toThrow(
      /65 headers, over the limit/,
    );
    expect(() => normalizeResponse({ status: 200, headers: { "set-cookie": ["a=" + "v".repeat(16 * 1024)] } })).toThrow(
      /bytes, over the limit/,
    );
  });

  it("drops framing, hop-by-hop and proxy headers, invalid names and values, and later case duplicates", () => {
    const response = normalizeResponse({
      status: 200,
      headers: {
        "Transfer-Encoding": "chunked",
        "Content-Length": "3",
        connection: "close",
        "Keep-Alive": "timeout=1",
        te: "trailers",
        Trailer: "x-t",
        upgrade: "h2c",
        "Proxy-Connection": "keep-alive",
        "proxy-authorization": "Basic x",
        "HTTP2-Settings": "AAA",
        "x-crlf": "a\r\nSet-Cookie: stolen=1",
        "x-nul": "a\u0000b",
        "x-wide": "snowman \u2603",
        "bad name": "x",
        "x:colon": "x",
        "": "empty",
        "X-Dup": "first",
        "x-dup": "second",
        "x-tab": "a\tb",
        "x-latin1": "caf\u00e9",
      },
      body: "abc",
    });
    expect(response.headers).toEqual({ "X-Dup": "first", "x-tab": "a\tb", "x-latin1": "caf\u00e9" });
  });

  it("refuses a body or headers over their limits with a RangeError", () => {
    expect(() => normalizeResponse({ status: 200, body: "x".repeat(RESPONSE_MAX_BODY_BYTES + 1) })).toThrow(RangeError);
    const bytes = Buffer.alloc(RESPONSE_MAX_BODY_BYTES + 1);
    expect(() => normalizeResponse({ status: 200, body: bytes })).toThrow(RangeError);
    // A forged base64 body is measured decoded.
    expect(() => normalizeResponse({ status: 200, body: bytes.toString("base64"), bodyEncoding: "base64" })).toThrow(
      RangeError,
    );
    const many = Object.fromEntries(Array.from({ length: RESPONSE_MAX_HEADERS + 1 }, (_, n) => [`x-${n}`, "1"]));
    expect(() => normalizeResponse({ status: 200, headers: many })).toThrow(/headers, over the limit/);
    expect(() => normalizeResponse({ status: 200, headers: { "x-big": "v".repeat(16 * 1024) } })).toThrow(
      /bytes, over the limit/,
    );
    expect(normalizeResponse({ status: 200, body: "x".repeat(RESPONSE_MAX_BODY_BYTES) }).body).toHaveLength(
      RESPONSE_MAX_BODY_BYTES,
    );
  });
});

describe("runInvocation: emit limits", () => {
  const limited = (maxEmits: number, maxEmitBytes = 1024 ** 2) => invocation({ limits: { maxEmits, maxEmitBytes } });

  it("ends the run at the emit past the count, keeping the ones before, even when the code catches the error", async () => {
    let after = false;
    const result = await runInvocation(
      {
        async run(this: any) {
          for (let n = 0; n < 100; n++) {
            try {
              this.$emit({ n });
            } catch {
              // A component that swallows the error does not get to go on emitting.
            }
          }
          await tick(20);
          after = true;
        },
      },
      limited(3),
      noIo,
    );
    expect(result.emits.map((emit) => emit.event)).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }]);
    expect(result.error).toMatchObject({
      name: "EmitLimitError",
      message: expect.stringContaining("at most 3 events"),
    });
    expect(after).toBe(false);
  });

  it("ends the run at the emit past the count when the code catches it and returns in the same turn", async () => {
    const result = await runInvocation(
      {
        props: { db: "$.service.db" },
        run(this: any) {
          this.db.set("before", 1);
          try {
            for (let n = 0; n < 5; n++) this.$emit({ n });
          } catch {
            // Caught, then on without an await: nothing of this may count.
          }
          this.db.set("after", 2);
          console.log("written after the limit");
          this.$emit({ n: "late" });
        },
      },
      { ...limited(2), propTypes: { db: "$.service.db" } },
      noIo,
    );
    expect(result.error).toMatchObject({ name: "EmitLimitError" });
    expect(result.emits.map((emit) => emit.event)).toEqual([{ n: 0 }, { n: 1 }]);
    expect(result.dbWrites).toEqual({ before: 1 });
    expect(result.logs.map((log) => log.message)).not.toContain("written after the limit");
  });

  it("ends the run at the emit that passes the run's bytes", async () => {
    const result = await runInvocation(
      {
        run(this: any) {
          for (let n = 0; n < 10; n++) this.$emit({ n, pad: "p".repeat(400) });
        },
      },
      limited(1000, 1000),
      noIo,
    );
    expect(result.emits).toHaveLength(2);
    expect(result.error?.message).toContain("at most 1000 bytes");
  });
});

describe("runInvocation: errors and timeouts", () => {
  it("keeps the stack of a ConfigurationError only when it asks to expose it", async () => {
    class ConfigurationError extends Error {
      exposeStack: boolean;
      constructor(message: string, exposeStack = false) {
        super(message);
        this.name = "ConfigurationError";
        this.exposeStack = exposeStack;
      }
    }
    const quiet = await runInvocation(
      {
        run: () => {
          throw new ConfigurationError("Set the API URL");
        },
      },
      invocation(),
    );
    expect(quiet.error).toEqual({ name: "ConfigurationError", message: "Set the API URL", ts: expect.any(Number) });
    const loud = await runInvocation(
      {
        run: () => {
          throw new ConfigurationError("bad", true);
        },
      },
      invocation(),
    );
    expect(loud.error?.stack).toContain("ConfigurationError: bad");
  });

  it("reports any thrown value and keeps what happened before the throw", async () => {
    const result = await runInvocation(
      {
        props: { db: "$.service.db" },
        run(this: any) {
          console.log("before %s", "throw");
          this.$emit({ n: 1 });
          this.db.set("k", 1);
          throw "a plain string";
        },
      },
      invocation({ propTypes: { db: "$.service.db" } }),
      noIo,
    );
    expect(result.error).toMatchObject({ name: "Error", message: "a plain string" });
    expect(result.emits).toHaveLength(1);
    expect(result.dbWrites).toEqual({ k: 1 });
    expect(result.logs).toMatchObject([{ level: "log", message: "before throw" }]);
  });

  it("describes a thrown object and keeps an Error's name and stack", async () => {
    const thrownObject = await runInvocation(
      {
        run() {
          throw { code: 42 };
        },
      },
      invocation(),
      noIo,
    );
    expect(thrownObject.error?.message).toBe("{ code: 42 }");
    class QuotaError extends Error {
      override name = "QuotaError";
    }
    const thrownError = await runInvocation(
      {
        async run() {
          throw new QuotaError("over");
        },
      },
      invocation(),
      noIo,
    );
    expect(thrownError.error).toMatchObject({ name: "QuotaError", message: "over" });
    expect(thrownError.error?.stack).toContain("QuotaError: over");
  });

  it("stops waiting at timeoutMs with a TimeoutError and ignores what the code does afterwards", async () => {
    let lateEmit: (() => void) | undefined;
    const result = await runInvocation(
      {
        async run(this: any) {
          this.$emit({ n: 1 });
          lateEmit = () => this.$emit({ n: 2 });
          await new Promise(() => {});
        },
      },
      invocation({ timeoutMs: 50 }),
      noIo,
    );
    lateEmit?.();
    expect(result.error).toMatchObject({ name: "TimeoutError", message: "the invocation timed out after 0.05s" });
    expect(result.emits).toEqual([{ event: { n: 1 }, meta: {} }]);
  });
});

describe("failCurrentInvocation", () => {
  it("ends the invocation whose callback reports a stray error, and no other", async () => {
    const component = {
      async run(this: any, event: { fail: boolean }) {
        this.$emit("started");
        // What the sandbox's uncaughtException handler does for an error thrown in a timer.
        if (event.fail) setTimeout(() => failCurrentInvocation(new Error("stray")), 5);
        await tick(50);
      },
    };
    const [failing, other] = await Promise.all([
      runInvocation(component, invocation({ event: { fail: true } }), noIo),
      runInvocation(component, invocation({ event: { fail: false } }), noIo),
    ]);
    expect(failing.error).toMatchObject({ name: "Error", message: "stray" });
    expect(failing.emits).toHaveLength(1);
    expect(other.error).toBeUndefined();
    expect(failCurrentInvocation(new Error("outside"))).toBe(false);
  });
});

describe("runInvocation: console and process.env", () => {
  it("keeps logs and PD_COMPONENT apart for concurrent invocations of different sources", async () => {
    const component = {
      async run(this: any) {
        for (let round = 0; round < 3; round += 1) {
          console.info("round %d of %s", round, process.env.PD_COMPONENT);
          await tick(5);
          this.$emit({ env: process.env.PD_COMPONENT, keys: Object.keys(process.env).includes("PD_COMPONENT") });
        }
        console.warn({ source: process.env.PD_COMPONENT });
      },
    };
    const [a, b] = await Promise.all([
      runInvocation(component, invocation({ sourceId: "dc_a" }), noIo),
      runInvocation(component, invocation({ sourceId: "dc_b" }), noIo),
    ]);
    for (const [result, id] of [
      [a, "dc_a"],
      [b, "dc_b"],
    ] as const) {
      expect(result.logs.map((log) => [log.level, log.message])).toEqual([
        ["info", `round 0 of ${id}`],
        ["info", `round 1 of ${id}`],
        ["info", `round 2 of ${id}`],
        ["warn", `{ source: '${id}' }`],
      ]);
      expect(result.emits.map((emit) => emit.event)).toEqual(Array(3).fill({ env: id, keys: true }));
    }
    // Outside any invocation the variable is whatever the process has (nothing, here).
    expect(process.env.PD_COMPONENT).toBeUndefined();
  });

  it("ignores writes to PD_COMPONENT inside an invocation", async () => {
    const result = await runInvocation(
      {
        run(this: any) {
          process.env.PD_COMPONENT = "dc_forged";
          delete process.env.PD_COMPONENT;
          this.$emit(process.env.PD_COMPONENT);
        },
      },
      invocation({ sourceId: "dc_real" }),
      noIo,
    );
    expect(result.emits[0]?.event).toBe("dc_real");
    expect(process.env.PD_COMPONENT).toBeUndefined();
  });

  it("bounds the log volume of one invocation", async () => {
    const result = await runInvocation(
      {
        run() {
          for (let i = 0; i < 2000; i += 1) console.log("x".repeat(1000));
        },
      },
      invocation(),
      noIo,
    );
    const total = result.logs.reduce((sum, log) => sum + log.message.length, 0);
    expect(total).toBeLessThanOrEqual(LOG_MAX_BYTES);
    expect(result.logs.at(-1)?.message).toContain("further logs were dropped");
  });
});
