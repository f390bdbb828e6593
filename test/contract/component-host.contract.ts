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
import type { HttpResponseSpec, Invocation, InvocationResult, WorkflowInvocation } from "#runtime/protocol";
import { DB_MAX_BYTES } from "#runtime/result-limits";
import { workflowCode, workflowRun } from "../support/workflow-code.ts";

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

/** What a host of the contract can do beyond sources. */
export interface ComponentHostCapabilities {
  /**
   * Whether the host runs workflows (`prepareWorkflow`/`invokeWorkflow`/`removeWorkflow`); the
   * workflow cases are skipped otherwise. (The Lambda host's come with step 10 of
   * docs/design/workflows.md.)
   */
  readonly workflows: boolean;
}

let sources = 0;
let workflows = 0;

export function componentHostContract(
  name: string,
  start: () => Promise<ComponentHostFixture>,
  capabilities: ComponentHostCapabilities,
): void {
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
        message:
          "invalid invocation: kind must be one of run, deploy, activate, deactivate, additionalProps, propOptions",
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

    describe.runIf(capabilities.workflows)("workflows", () => {
      /** Deploys a new workflow of `codes` (one step each, in order), runs it once, removes it. */
      async function runWorkflow(codes: string[], event: unknown = {}, overrides: Partial<WorkflowInvocation> = {}) {
        workflows += 1;
        const workflow = workflowCode(`p_contract${workflows}${process.pid}`, codes);
        await fixture.host.prepareWorkflow(workflow);
        const invocation = workflowRun(workflow, event, overrides);
        const result = await fixture.host.invokeWorkflow(workflow, invocation);
        await fixture.host.removeWorkflow(workflow);
        return { result, invocationId: invocation.invocationId };
      }

      const step = (body: string) => `export default defineComponent({ async run({ steps, $ }) { ${body} } });`;

      it("runs three steps in order, each seeing the trigger and the earlier steps' exports and return values", async () => {
        const { result, invocationId } = await runWorkflow(
          [
            step(`$.export("doubled", steps.trigger.event.n * 2); return "first";`),
            `import { format } from "node:util";
            export default defineComponent({
              async run({ steps, $ }) {
                $.export("$summary", format("got %d", steps.s1.doubled));
                return { sum: steps.s1.doubled + 1, from: steps.s1.$return_value, workflow: process.env.PD_COMPONENT };
              },
            });`,
            step(
              `console.log("third", steps.s2.$return_value.sum); $.send.emit({ raw_event: steps.s2.$return_value });`,
            ),
          ],
          { n: 20 },
        );
        expect(result).toEqual({
          invocationId,
          steps: [
            {
              id: "c_s1",
              status: "success",
              exportBytes: expect.any(Number),
              dbWrites: {},
              durationMs: expect.any(Number),
            },
            {
              id: "c_s2",
              status: "success",
              summary: "got 40",
              exportBytes: expect.any(Number),
              dbWrites: {},
              durationMs: expect.any(Number),
            },
            { id: "c_s3", status: "success", exportBytes: 0, dbWrites: {}, durationMs: expect.any(Number) },
          ],
          sends: [
            { type: "emit", raw_event: { sum: 41, from: "first", workflow: `p_contract${workflows}${process.pid}` } },
          ],
          logs: [{ ts: expect.any(Number), level: "log", message: "third 41", step: "c_s3" }],
          durationMs: expect.any(Number),
        });
        // `{"doubled":40}` and `"first"`: only sizes cross, never the values.
        expect(result.steps[0]?.exportBytes).toBe(Buffer.byteLength('40"first"'));
      });

      it("ends the run at a step that throws: the error is that step's, with the user's line, and no later step runs", async () => {
        const { result } = await runWorkflow([
          step(`$.send.emit({ raw_event: "before" });`),
          `export default defineComponent({
            async run() {
              throw new TypeError("step two failed"); // line 3
            },
          });`,
          step(`$.send.emit({ raw_event: "never" });`),
        ]);
        expect(result.error).toBeUndefined();
        expect(result.steps.map((outcome) => [outcome.id, outcome.status])).toEqual([
          ["c_s1", "success"],
          ["c_s2", "error"],
        ]);
        expect(result.steps[1]?.error).toMatchObject({ name: "TypeError", message: "step two failed" });
        expect(result.steps[1]?.error?.stack).toMatch(/component\.ts:3:\d+/);
        expect(result.sends).toEqual([{ type: "emit", raw_event: "before" }]);
      });

      it("hands over the first $.respond of a respondable run, normalised, and runs the later steps", async () => {
        const { result } = await runWorkflow(
          [
            step(
              `await $.respond({ status: "201", headers: { "x-made": "yes" }, body: { ok: steps.trigger.event.ok } });`,
            ),
            step(`await $.respond({ status: 500, body: "second" }); $.send.emit({ raw_event: "after" });`),
          ],
          { ok: true },
          { respondable: true },
        );
        expect(result.error).toBeUndefined();
        expect(result.steps.map((outcome) => outcome.status)).toEqual(["success", "success"]);
        expect(result.response).toEqual({
          status: 201,
          headers: { "x-made": "yes", "content-type": "application/json" },
          body: '{"ok":true}',
        });
        expect(result.sends).toEqual([{ type: "emit", raw_event: "after" }]);
      });

      it("ends the run at $.flow.exit as an exit, not an error, even when the step catches it", async () => {
        const { result } = await runWorkflow([
          step(`try { $.flow.exit("nothing to do"); } catch {} $.send.emit({ raw_event: "after exit" });`),
          step(`$.send.emit({ raw_event: "never" });`),
        ]);
        expect(result.error).toBeUndefined();
        expect(result.steps).toEqual([
          {
            id: "c_s1",
            status: "exited",
            exitReason: "nothing to do",
            exportBytes: 0,
            dbWrites: {},
            durationMs: expect.any(Number),
          },
        ]);
        expect(result.sends).toEqual([]);
      });

      it("fails the step whose module does not load with a LoadError and the user's line; the earlier steps' work stays", async () => {
        const { result } = await runWorkflow([
          step(`$.send.emit({ raw_event: "loaded" });`),
          '// one\nthrow new Error("no such step"); // line 2\nexport default defineComponent({ async run() {} });',
          step(`$.send.emit({ raw_event: "never" });`),
        ]);
        expect(result.error).toBeUndefined();
        expect(result.steps.map((outcome) => [outcome.id, outcome.status])).toEqual([
          ["c_s1", "success"],
          ["c_s2", "error"],
        ]);
        expect(result.steps[1]?.error).toMatchObject({
          name: "LoadError",
          message: expect.stringMatching(/no such step \(line 2/),
        });
        expect(result.sends).toEqual([{ type: "emit", raw_event: "loaded" }]);
      });
    });
  });
}
