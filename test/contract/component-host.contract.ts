/**
 * The `ComponentHost` contract: what a host hands trusted code for what a component did, the same
 * on every platform. Run against the local host (sandbox children) and the AWS host (against a
 * Lambda stand-in that runs the real runtime layer): `component-hosts.test.ts`.
 *
 * What comes back from the process that ran the code may have been forged by that code: each
 * platform says how its code forges a result (`forge`), and the host must treat the forgery alike.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { invalidCode } from "#adapters/component-compile-error";
import type { ComponentHost, SourceCode } from "#core/ports/component-host";
import { mergeServiceDb, SERVICE_DB_LIMIT_ERROR } from "#core/run-limits";
import { sha256Hex } from "#core/sha256";
import type { HttpResponseSpec, Invocation, InvocationResult } from "#runtime/protocol";
import { DB_MAX_BYTES } from "#runtime/result-limits";

export interface ComponentHostFixture {
  readonly host: ComponentHost;
  /**
   * Statements of a component's `run` that make the host receive `result` (a JavaScript expression
   * of an object) as the run's result, as code running beside the runtime can on this platform. The
   * component imports `node:fs` as `fs`.
   */
  forge(result: string): string;
  close(): Promise<void>;
}

let sources = 0;

export function componentHostContract(name: string, start: () => Promise<ComponentHostFixture>): void {
  describe(`ComponentHost contract: ${name}`, () => {
    let fixture: ComponentHostFixture;

    beforeAll(async () => {
      fixture = await start();
    }, 120_000);
    afterAll(async () => {
      await fixture?.close();
    });

    /** Deploys `code` as a new source and runs it once. */
    async function runOnce(
      code: string,
      invocation: Partial<Invocation> = {},
      onRespond?: (r: HttpResponseSpec) => void,
    ) {
      sources += 1;
      const source: SourceCode = {
        sourceId: `dc_contract${sources}${process.pid}`,
        ownerId: "o_contract",
        code,
        codeHash: sha256Hex(code),
      };
      await fixture.host.prepare(source);
      const result = await fixture.host.invoke(
        source,
        {
          invocationId: `inv_${sources}`,
          kind: "run",
          sourceId: source.sourceId,
          props: { http: { endpoint: "https://e.test", customResponse: true }, greeting: "hi" },
          propTypes: { http: "$.interface.http", greeting: "string", db: "$.service.db" },
          db: { count: 41 },
          event: { n: 1 },
          timeoutMs: 10_000,
          ...invocation,
        },
        onRespond ? { onRespond } : undefined,
      );
      await fixture.host.remove(source);
      return { result, invocationId: `inv_${sources}` };
    }

    /** A component whose run makes the host receive `forged` (with the run's invocation id filled in). */
    function forging(forged: Record<string, unknown>): string {
      const expression = `Object.assign(${JSON.stringify(forged)}, { invocationId: "inv_${sources + 1}" })`;
      return `import * as fs from "node:fs";
        export default { async run() { ${fixture.forge(expression)} } };`;
    }

    const wellFormed = { emits: [], dbWrites: {}, logs: [], durationMs: 1 };

    /** The run failed on its malformed result: nothing of it is applied, the error names the field. */
    function expectRefused(result: InvocationResult, invocationId: string, problem: string) {
      expect(result).toEqual({
        invocationId,
        emits: [],
        dbWrites: {},
        logs: [],
        error: { name: "SandboxError", message: expect.any(String), ts: expect.any(Number) },
        durationMs: expect.any(Number),
      });
      expect(result.error?.message).toBe(
        `the component's runtime sent a malformed result (${problem}); nothing of it was applied`,
      );
    }

    it("hands over what a run did: emits, db writes, logs, no error", async () => {
      const { result, invocationId } = await runOnce(`export default {
        props: { greeting: "string", db: "$.service.db" },
        async run(event) {
          const count = this.db.get("count") + 1;
          this.db.set("count", count);
          console.log("counted", count);
          this.$emit({ greeting: this.greeting, event, count }, { id: "e" + count, summary: "run " + count, ts: 5 });
        },
      };`);
      expect(result).toEqual({
        invocationId,
        emits: [
          { event: { greeting: "hi", event: { n: 1 }, count: 42 }, meta: { id: "e42", summary: "run 42", ts: 5 } },
        ],
        dbWrites: { count: 42 },
        logs: [{ ts: expect.any(Number), level: "log", message: "counted 42" }],
        durationMs: expect.any(Number),
      });
    });

    it("hands over what the code threw as the run's error, with the user's line, and what it did before", async () => {
      const { result } = await runOnce(`export default {
        async run() {
          this.$emit("before");
          throw new TypeError("boom"); // line 4
        },
      };`);
      expect(result.emits).toEqual([{ event: "before", meta: {} }]);
      expect(result.error).toMatchObject({ name: "TypeError", message: "boom", ts: expect.any(Number) });
      expect(result.error?.stack).toMatch(/component\.ts:4:\d+/);
    });

    it("hands over a respond once, normalised, and keeps it as the run's response", async () => {
      const responses: HttpResponseSpec[] = [];
      const { result } = await runOnce(
        `export default {
          props: { http: { type: "$.interface.http", customResponse: true } },
          async run() {
            this.http.respond({ status: "201", headers: { "x-made": "yes", connection: "close" }, body: { ok: true } });
            this.http.respond({ status: 500, body: "second" });
          },
        };`,
        {},
        (response) => responses.push(response),
      );
      const expected = {
        status: 201,
        headers: { "x-made": "yes", "content-type": "application/json" },
        body: '{"ok":true}',
      };
      expect(responses).toEqual([expected]);
      expect(result.response).toEqual(expected);
      expect(result.error).toBeUndefined();
    });

    it("applies a well-formed forged result as the run's, leaving limits to trusted code: an oversized db", async () => {
      // The runtime refuses a db past its limit; code that forges its result gets past it, and the
      // host hands the writes over as they are: trusted code refuses them (`mergeServiceDb`).
      const big = "x".repeat(DB_MAX_BYTES);
      const { result, invocationId } = await runOnce(forging({ ...wellFormed, dbWrites: { big } }));
      expect(result).toEqual({ invocationId, emits: [], dbWrites: { big }, logs: [], durationMs: expect.any(Number) });
      expect(mergeServiceDb({}, result.dbWrites, 0).refused?.name).toBe(SERVICE_DB_LIMIT_ERROR);
    });

    it.each([
      [
        "a bad emit",
        { ...wellFormed, emits: [{ event: "forged", meta: { id: { x: 1 } } }] },
        "emits[0].meta.id must be a string or a finite number",
      ],
      ["an emit that is not an object", { ...wellFormed, emits: ["forged"] }, "emits[0] must be an object"],
      ["db writes that are a list", { ...wellFormed, dbWrites: [1] }, "dbWrites must be an object"],
      ["logs that are not an array", { ...wellFormed, logs: "log" }, "logs must be an array"],
      [
        "a log of an unknown level",
        { ...wellFormed, logs: [{ ts: 1, level: "shout", message: "x" }] },
        "logs[0].level must be one of log, info, warn, error, debug",
      ],
      [
        "a response with a bad status",
        { ...wellFormed, response: { status: 42, headers: {}, body: "" } },
        "response.status must be an integer from 200 to 599",
      ],
      [
        "a response with bad headers",
        { ...wellFormed, response: { status: 200, headers: { "x-n": 5 }, body: "" } },
        "response.headers.x-n must be a string",
      ],
      ["an error that is not an object", { ...wellFormed, error: "forged" }, "error must be an object"],
      ["a duration that is not a number", { ...wellFormed, durationMs: "slow" }, "durationMs must be a finite number"],
    ])("fails the run on a forged result with %s, applying none of it", async (_what, forged, problem) => {
      const { result, invocationId } = await runOnce(forging(forged));
      expectRefused(result, invocationId, problem);
    });

    it("fails a run that trusted code sent malformed (a bug of the server) with a TypeError saying why", async () => {
      const { result } = await runOnce("export default { async run() { this.$emit('ran'); } };", {
        kind: "explode" as Invocation["kind"],
      });
      expect(result.emits).toEqual([]);
      expect(result.error).toMatchObject({
        name: "TypeError",
        message: "invalid invocation: kind must be one of run, deploy, activate, deactivate, additionalProps",
      });
    });

    it("describes a component", async () => {
      const description = await fixture.host.describe(`export default {
        name: "Described", version: "0.1.0", dedupe: "unique",
        props: { db: "$.service.db", greeting: { type: "string", label: "Greeting", optional: true } },
        hooks: { async deploy() {} },
        methods: { helper() {} },
        async run() {},
      };`);
      expect(description).toEqual({
        name: "Described",
        version: "0.1.0",
        dedupe: "unique",
        type: "source",
        hooks: ["deploy"],
        methods: ["helper"],
        hasRun: true,
        hasAdditionalProps: false,
        props: [
          { name: "db", type: "$.service.db" },
          { name: "greeting", type: "string", label: "Greeting", optional: true },
        ],
      });
    });

    it("refuses code that throws while loading with the message and the user's line", async () => {
      const code = '// one\n// two\nthrow new Error("no metadata");\nexport default {};';
      await expect(fixture.host.describe(code)).rejects.toMatchObject({
        code: invalidCode("x").code,
        message: expect.stringMatching(/^component_code: .*no metadata \(line 3/),
      });
    });
  });
}
