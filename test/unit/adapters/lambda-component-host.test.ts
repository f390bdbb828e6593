import {
  CreateFunctionCommand,
  DeleteFunctionCommand,
  type FunctionConfiguration,
  GetFunctionCommand,
  InvokeCommand,
  LambdaClient,
  ResourceConflictException,
  ResourceNotFoundException,
  TooManyRequestsException,
  UpdateFunctionCodeCommand,
  UpdateFunctionConfigurationCommand,
} from "@aws-sdk/client-lambda";
import { mockClient } from "aws-sdk-client-mock";
import { unzipSync } from "fflate";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { LambdaComponentHost, sourceFunctionName, workflowFunctionName } from "#adapters/aws/lambda-component-host";
import { sourceZip } from "#adapters/aws/source-bundle";
import { workflowZip } from "#adapters/aws/workflow-bundle";
import { PROBE_ID_TIME } from "#config/shared-names";
import type { SourceCode, WorkflowCode } from "#core/ports/component-host";
import type { Invocation, InvocationResult, WorkflowResult } from "#runtime/protocol";
import { workflowCode, workflowRun } from "../../support/workflow-code.ts";

const lambdaMock = mockClient(LambdaClient);

const ROLE = "arn:aws:iam::123456789012:role/sluice-source";
const LAYER = "arn:aws:lambda:eu-west-1:123456789012:layer:sluice-runtime:7";
const LOG_GROUP = "/sluice/dev/sources";
const SOURCE: SourceCode = {
  sourceId: "dc_01kab00000abcdefghjkmn",
  ownerId: "o_01kab00000abcdefghjkmn",
  code: "export default { name: 'x' };",
  codeHash: "0".repeat(64),
};
const NAME = `sluice-dev-${SOURCE.sourceId}`;
/** What the describer answers for SOURCE's code. */
const DESCRIPTION = {
  name: "x",
  type: "source",
  hooks: [],
  methods: [],
  hasRun: true,
  hasAdditionalProps: false,
  props: [],
};
const bundle = async (code: string) => `// bundled\n${code}`;
const EXPECTED_ZIP = sourceZip(`// bundled\n${SOURCE.code}`);
const ZIP_SHA_BASE64 = Buffer.from(EXPECTED_ZIP.sha256, "hex").toString("base64");

function host(overrides: { bundle?: (code: string) => Promise<string>; deploy?: null; describeOnly?: boolean } = {}) {
  let now = 1_000;
  const deploy = {
    describerFunction: "sluice-dev-describer",
    bundle: overrides.bundle ?? bundle,
    ...(overrides.describeOnly
      ? {}
      : { functions: { sourceRoleArn: ROLE, runtimeLayerArn: LAYER, logGroup: LOG_GROUP } }),
  };
  return new LambdaComponentHost({
    lambda: new LambdaClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
    stage: "dev",
    invocationTimeoutMs: 30_000,
    clock: { nowMs: () => (now += 250) },
    ...(overrides.deploy === null ? {} : { deploy }),
  });
}

const settled: FunctionConfiguration = {
  State: "Active",
  LastUpdateStatus: "Successful",
  Role: ROLE,
  Handler: "index.handler",
  Runtime: "nodejs22.x",
  MemorySize: 256,
  Timeout: 33,
  Layers: [{ Arn: LAYER }],
  LoggingConfig: { LogFormat: "Text", LogGroup: LOG_GROUP },
};

/** What every source or workflow function is created with, besides its name, code, description and tags. */
const CREATED_SETTINGS = {
  Role: ROLE,
  Handler: "index.handler",
  Runtime: "nodejs22.x",
  Architectures: ["arm64"],
  Layers: [LAYER],
  MemorySize: 256,
  Timeout: 33,
  LoggingConfig: { LogFormat: "Text", LogGroup: LOG_GROUP },
  PackageType: "Zip",
};

const notFound = () => new ResourceNotFoundException({ message: "Function not found", $metadata: {} });

const invocation: Invocation = {
  invocationId: "inv-1",
  kind: "run",
  sourceId: SOURCE.sourceId,
  props: {},
  propTypes: {},
  db: {},
  timeoutMs: 30_000,
};

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

beforeEach(() => {
  lambdaMock.reset();
});

describe("sourceFunctionName", () => {
  it("names functions sluice-<stage>-<source id> and refuses names over 64 characters", () => {
    expect(sourceFunctionName("dev", SOURCE.sourceId)).toBe(NAME);
    expect(sourceFunctionName("a".repeat(30), SOURCE.sourceId)).toHaveLength(63);
    expect(() => sourceFunctionName("a".repeat(32), SOURCE.sourceId)).toThrow(/at most 64/);
  });
});

describe("LambdaComponentHost.prepare", () => {
  it("creates a missing function with the runtime layer, the logging-only role and no environment", async () => {
    lambdaMock
      .on(GetFunctionCommand)
      .rejectsOnce(notFound())
      .resolves({ Configuration: { ...settled, FunctionName: NAME } });
    lambdaMock.on(CreateFunctionCommand).resolves({});
    await host().prepare(SOURCE);

    const calls = lambdaMock.commandCalls(CreateFunctionCommand);
    expect(calls).toHaveLength(1);
    const input = calls[0]!.args[0].input;
    expect({ ...input, Code: undefined }).toEqual({
      FunctionName: NAME,
      ...CREATED_SETTINGS,
      Description: `Sluice source ${SOURCE.sourceId}`,
      Tags: { "sluice:source": SOURCE.sourceId, "sluice:stage": "dev" },
      Code: undefined,
    });
    expect(input.Environment).toBeUndefined();
    expect(Buffer.from(input.Code!.ZipFile!).equals(Buffer.from(EXPECTED_ZIP.zip))).toBe(true);
    expect(Object.keys(unzipSync(input.Code!.ZipFile!))).toEqual(["component.mjs", "index.mjs"]);
    // Waited for the new function to become active.
    expect(lambdaMock.commandCalls(GetFunctionCommand).length).toBeGreaterThanOrEqual(2);
    expect(lambdaMock.commandCalls(UpdateFunctionCodeCommand)).toHaveLength(0);
  });

  it("updates the code of an existing function whose code differs, and leaves matching settings alone", async () => {
    lambdaMock.on(GetFunctionCommand).resolves({ Configuration: { ...settled, CodeSha256: "b2xk" } });
    lambdaMock.on(UpdateFunctionCodeCommand).resolves({});
    await host().prepare(SOURCE);

    const update = lambdaMock.commandCalls(UpdateFunctionCodeCommand);
    expect(update).toHaveLength(1);
    const { ZipFile, ...rest } = update[0]!.args[0].input;
    expect(rest).toEqual({ FunctionName: NAME, Architectures: ["arm64"] });
    expect(Buffer.from(ZipFile!).equals(Buffer.from(EXPECTED_ZIP.zip))).toBe(true);
    expect(lambdaMock.commandCalls(CreateFunctionCommand)).toHaveLength(0);
    expect(lambdaMock.commandCalls(UpdateFunctionConfigurationCommand)).toHaveLength(0);
  });

  it("uploads nothing for unchanged code but re-applies settings that drifted (a new runtime layer)", async () => {
    const oldLayer = LAYER.replace(/:7$/, ":6");
    lambdaMock
      .on(GetFunctionCommand)
      .resolves({ Configuration: { ...settled, CodeSha256: ZIP_SHA_BASE64, Layers: [{ Arn: oldLayer }] } });
    lambdaMock.on(UpdateFunctionConfigurationCommand).resolves({});
    await host().prepare(SOURCE);

    expect(lambdaMock.commandCalls(UpdateFunctionCodeCommand)).toHaveLength(0);
    const config = lambdaMock.commandCalls(UpdateFunctionConfigurationCommand);
    expect(config).toHaveLength(1);
    expect(config[0]!.args[0].input).toEqual({
      FunctionName: NAME,
      Role: ROLE,
      Handler: "index.handler",
      Runtime: "nodejs22.x",
      Layers: [LAYER],
      MemorySize: 256,
      Timeout: 33,
      LoggingConfig: { LogFormat: "Text", LogGroup: LOG_GROUP },
      Environment: { Variables: {} },
    });
  });

  it("waits for a function that is still being created before updating it", async () => {
    lambdaMock
      .on(GetFunctionCommand)
      .resolvesOnce({ Configuration: { ...settled, State: "Pending", CodeSha256: "b2xk" } })
      .resolves({ Configuration: { ...settled, CodeSha256: "b2xk" } });
    lambdaMock.on(UpdateFunctionCodeCommand).resolves({});
    await host().prepare(SOURCE);
    const order = lambdaMock.calls().map((call) => call.args[0].constructor.name);
    expect(order.slice(0, 3)).toEqual(["GetFunctionCommand", "GetFunctionCommand", "UpdateFunctionCodeCommand"]);
  });

  it("stops waiting for a new function at the caller's deadline and says it is pending", async () => {
    lambdaMock
      .on(GetFunctionCommand)
      .rejectsOnce(notFound())
      .resolves({ Configuration: { ...settled, State: "Pending", FunctionName: NAME } });
    lambdaMock.on(CreateFunctionCommand).resolves({});
    // A deadline already passed: the waiters' least, two seconds.
    expect(await host().prepare(SOURCE, { readyByMs: 0 })).toBe("pending");
    expect(lambdaMock.commandCalls(CreateFunctionCommand)).toHaveLength(1);
    // Later (the deploy finisher, no deadline), the same prepare finds it, waits, and is done.
    lambdaMock.reset();
    lambdaMock
      .on(GetFunctionCommand)
      .resolvesOnce({ Configuration: { ...settled, State: "Pending", CodeSha256: ZIP_SHA_BASE64 } })
      .resolves({ Configuration: { ...settled, CodeSha256: ZIP_SHA_BASE64 } });
    expect(await host().prepare(SOURCE)).toBeUndefined();
    expect(lambdaMock.commandCalls(CreateFunctionCommand)).toHaveLength(0);
  });

  it("does nothing for an up-to-date function", async () => {
    lambdaMock.on(GetFunctionCommand).resolves({ Configuration: { ...settled, CodeSha256: ZIP_SHA_BASE64 } });
    await host().prepare(SOURCE);
    expect(lambdaMock.commandCalls(UpdateFunctionCodeCommand)).toHaveLength(0);
    expect(lambdaMock.commandCalls(UpdateFunctionConfigurationCommand)).toHaveLength(0);
    expect(lambdaMock.commandCalls(CreateFunctionCommand)).toHaveLength(0);
  });

  it("updates the function that a concurrent deploy created first", async () => {
    lambdaMock
      .on(GetFunctionCommand)
      .rejectsOnce(notFound())
      .resolves({ Configuration: { ...settled, CodeSha256: "b2xk" } });
    lambdaMock
      .on(CreateFunctionCommand)
      .rejects(new ResourceConflictException({ message: "Function already exist", $metadata: {} }));
    lambdaMock.on(UpdateFunctionCodeCommand).resolves({});
    await host().prepare(SOURCE);
    expect(lambdaMock.commandCalls(UpdateFunctionCodeCommand)).toHaveLength(1);
  });

  it("refuses to deploy in a function that may only invoke sources", async () => {
    await expect(host({ deploy: null }).prepare(SOURCE)).rejects.toThrow(/without the settings to deploy sources/);
    await expect(host({ deploy: null }).describe(SOURCE.code)).rejects.toThrow(/without the settings/);
    expect(lambdaMock.calls()).toHaveLength(0);
  });

  it("describes but refuses to create functions in a function deployed to describe components only", async () => {
    lambdaMock
      .on(InvokeCommand)
      .resolves({ StatusCode: 200, Payload: encode({ ok: true, description: DESCRIPTION }) as never });
    const describer = host({ describeOnly: true });
    await expect(describer.describe(SOURCE.code)).resolves.toMatchObject({ name: "x" });
    await expect(describer.prepare(SOURCE)).rejects.toThrow(/to describe components only/);
    await expect(
      describer.prepareWorkflow({ workflowId: "p_x", ownerId: "o_x", deploymentId: "d_x", steps: [] }),
    ).rejects.toThrow(/to describe components only/);
    expect(lambdaMock.commandCalls(InvokeCommand)).toHaveLength(1);
    expect(lambdaMock.commandCalls(CreateFunctionCommand)).toHaveLength(0);
  });

  it("passes a bundling failure through without touching Lambda", async () => {
    const failing = host({
      bundle: async () => {
        throw new Error("boom");
      },
    });
    await expect(failing.prepare(SOURCE)).rejects.toThrow("boom");
    expect(lambdaMock.calls()).toHaveLength(0);
  });
});

describe("LambdaComponentHost.invoke", () => {
  const result: InvocationResult = {
    invocationId: "inv-1",
    emits: [{ event: { a: 1 }, meta: { id: "e1", summary: "one" } }],
    dbWrites: { cursor: 5 },
    logs: [{ ts: 1, level: "log", message: "hello" }],
    response: { status: 201, headers: { "content-type": "text/plain" }, body: "made" },
    durationMs: 3,
  };

  it("invokes the source's function synchronously with the invocation and returns its result", async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 200, Payload: encode(result) as never });
    const onRespond = vi.fn();
    const answer = await host().invoke(SOURCE, invocation, { onRespond });

    const calls = lambdaMock.commandCalls(InvokeCommand);
    expect(calls).toHaveLength(1);
    const { Payload, ...rest } = calls[0]!.args[0].input;
    expect(rest).toEqual({ FunctionName: NAME, InvocationType: "RequestResponse" });
    expect(JSON.parse(new TextDecoder().decode(Payload as Uint8Array))).toEqual(invocation);
    // durationMs is measured by the host (clock: +250 ms per reading), not taken from the function.
    expect(answer).toEqual({ ...result, durationMs: 250 });
    expect(onRespond).toHaveBeenCalledExactlyOnceWith(result.response);
  });

  it("sends the run's data store grant in the invocation, and nothing of the in-process data store handler", async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 200, Payload: encode(result) as never });
    const grant = { url: "https://api.example/v1/data_store_calls", grant: "v1.sealed" };
    const dataStore = vi.fn();
    await host().invoke(SOURCE, invocation, { dataStore, dataStoreGrant: async () => grant });
    const { Payload } = lambdaMock.commandCalls(InvokeCommand)[0]!.args[0].input;
    expect(JSON.parse(new TextDecoder().decode(Payload as Uint8Array))).toEqual({
      ...invocation,
      dataStoreGrant: grant,
    });
    expect(dataStore).not.toHaveBeenCalled();
    // A grant the run could not use is declined: the invocation goes without one.
    await host().invoke(SOURCE, invocation, { dataStore, dataStoreGrant: async () => undefined });
    const declined = lambdaMock.commandCalls(InvokeCommand)[1]!.args[0].input.Payload as Uint8Array;
    expect(JSON.parse(new TextDecoder().decode(declined))).toEqual(invocation);
  });

  it.each([
    ["Sandbox.Timedout", "Task timed out after 33.00 seconds", "TimeoutError", /^the function was stopped: Task timed/],
    ["Runtime.OutOfMemory", "Runtime exited with error: signal: killed", "OutOfMemoryError", /^the function ran out/],
    ["Runtime.ExitError", "exited with status 1", "Runtime.ExitError", /^exited with status 1$/],
  ])(
    "reports a function error %s (%s) as the run's error, with no effects",
    async (errorType, errorMessage, name, message) => {
      lambdaMock.on(InvokeCommand).resolves({
        StatusCode: 200,
        FunctionError: "Unhandled",
        Payload: encode({ errorType, errorMessage }) as never,
      });
      const answer = await host().invoke(SOURCE, invocation);
      expect(answer).toMatchObject({ invocationId: "inv-1", emits: [], dbWrites: {}, logs: [] });
      expect(answer.error).toMatchObject({ name, message: expect.stringMatching(message) });
    },
  );

  it("keeps a __proto__ key of an emitted event and of a db write as data", async () => {
    const raw = JSON.stringify(result)
      .replace('"event":{"a":1}', '"event":{"a":1,"__proto__":{"x":1}}')
      .replace('"dbWrites":{"cursor":5}', '"dbWrites":{"cursor":5,"__proto__":{"y":2}}');
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 200, Payload: new TextEncoder().encode(raw) as never });
    const answer = await host().invoke(SOURCE, invocation);
    expect(Object.getOwnPropertyDescriptor(answer.emits[0]?.event, "__proto__")?.value).toEqual({ x: 1 });
    expect(Object.getOwnPropertyDescriptor(answer.dbWrites, "__proto__")?.value).toEqual({ y: 2 });
  });

  it("treats a malformed answer as the run's error, not as effects", async () => {
    for (const [payload, problem] of [
      [{ invocationId: "inv-1", emits: "nope" }, "emits must be an array"],
      [{ ...result, invocationId: "other" }, "invocationId must be the invocation's id (inv-1)"],
    ] as const) {
      lambdaMock.on(InvokeCommand).resolves({ StatusCode: 200, Payload: encode(payload) as never });
      const answer = await host().invoke(SOURCE, invocation);
      expect(answer.emits).toEqual([]);
      expect(answer.error).toMatchObject({ name: "SandboxError", message: expect.stringContaining(problem) });
    }
  });

  it("answers a describer reply of another shape as its own failure, not the component's", async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 200, Payload: encode({ ok: true, description: {} }) as never });
    await expect(host().describe(SOURCE.code)).rejects.toThrow(
      /describer function answered a malformed reply \(description\.type/,
    );
  });

  it("waits for a function that is still updating, then invokes it again", async () => {
    lambdaMock
      .on(InvokeCommand)
      .rejectsOnce(
        new ResourceConflictException({ message: "The operation cannot be performed at this time.", $metadata: {} }),
      )
      .resolves({ StatusCode: 200, Payload: encode(result) as never });
    lambdaMock.on(GetFunctionCommand).resolves({ Configuration: settled });
    const answer = await host().invoke(SOURCE, invocation);
    expect(answer.emits).toEqual(result.emits);
    expect(lambdaMock.commandCalls(InvokeCommand)).toHaveLength(2);
  });

  it("throws when Lambda itself fails (the host's failure, not the component's)", async () => {
    lambdaMock.on(InvokeCommand).rejects(new TooManyRequestsException({ message: "Rate exceeded", $metadata: {} }));
    await expect(host().invoke(SOURCE, invocation)).rejects.toThrow("Rate exceeded");
  });

  it("answers 'source not found' when the source's function is gone (deleted by a DELETE meanwhile)", async () => {
    lambdaMock.on(InvokeCommand).rejects(notFound());
    await expect(host().invoke(SOURCE, invocation)).rejects.toMatchObject({
      name: "DomainError",
      code: "not_found",
      message: "source not found",
    });
  });
});

describe("LambdaComponentHost.describe", () => {
  it("sends the bundle to the describer function and returns the description", async () => {
    lambdaMock
      .on(InvokeCommand)
      .resolves({ StatusCode: 200, Payload: encode({ ok: true, description: DESCRIPTION }) as never });
    expect(await host().describe(SOURCE.code)).toEqual(DESCRIPTION);
    const { Payload, ...rest } = lambdaMock.commandCalls(InvokeCommand)[0]!.args[0].input;
    expect(rest).toEqual({ FunctionName: "sluice-dev-describer", InvocationType: "RequestResponse" });
    expect(JSON.parse(new TextDecoder().decode(Payload as Uint8Array))).toEqual({
      kind: "describe",
      code: `// bundled\n${SOURCE.code}`,
    });
  });

  it("answers a load failure as a validation error on component_code with its line", async () => {
    lambdaMock.on(InvokeCommand).resolves({
      StatusCode: 200,
      Payload: encode({ ok: false, error: { message: "boom", line: 3, column: 9 } }) as never,
    });
    await expect(host().describe(SOURCE.code)).rejects.toMatchObject({
      code: "validation",
      message: "component_code: boom (line 3, column 9)",
      issues: [{ field: "component_code", message: "boom (line 3, column 9)" }],
    });
  });

  it("answers a describer that timed out as a validation error", async () => {
    lambdaMock.on(InvokeCommand).resolves({
      StatusCode: 200,
      FunctionError: "Unhandled",
      Payload: encode({ errorMessage: "Task timed out after 10.00 seconds" }) as never,
    });
    await expect(host().describe(SOURCE.code)).rejects.toMatchObject({
      code: "validation",
      message: expect.stringContaining("could not be loaded"),
    });
  });

  it("refuses a bundle too large for a synchronous invocation without calling Lambda", async () => {
    const huge = host({ bundle: async () => "x".repeat(6 * 1024 * 1024) });
    await expect(huge.describe("code")).rejects.toMatchObject({ code: "validation" });
    expect(lambdaMock.calls()).toHaveLength(0);
  });
});

describe("LambdaComponentHost.remove", () => {
  it("deletes the source's function", async () => {
    lambdaMock.on(DeleteFunctionCommand).resolves({});
    await host().remove(SOURCE);
    expect(lambdaMock.commandCalls(DeleteFunctionCommand)[0]!.args[0].input).toEqual({ FunctionName: NAME });
  });

  it("succeeds when the function is already gone, and throws other failures", async () => {
    lambdaMock.on(DeleteFunctionCommand).rejects(notFound());
    await expect(host().remove(SOURCE)).resolves.toBeUndefined();
    lambdaMock.on(DeleteFunctionCommand).rejects(new Error("AccessDenied"));
    await expect(host().remove(SOURCE)).rejects.toThrow("AccessDenied");
  });
});

describe("LambdaComponentHost's workflows", () => {
  const WORKFLOW: WorkflowCode = workflowCode("p_01kab00000abcdefghjkmn", [
    "export default defineComponent({ async run() { return 1; } });",
    "export default defineComponent({ async run() { return 2; } });",
    // The first step's code again: one module, named by its hash, in the zip once.
    "export default defineComponent({ async run() { return 1; } });",
  ]);
  const WORKFLOW_NAME = `sluice-dev-${WORKFLOW.workflowId}`;
  const [first, second] = WORKFLOW.steps as [WorkflowCode["steps"][0], WorkflowCode["steps"][0]];
  const EXPECTED = workflowZip([
    { codeHash: first.codeHash, bundle: `// bundled\n${first.code}` },
    { codeHash: second.codeHash, bundle: `// bundled\n${second.code}` },
  ]);
  const run = workflowRun(WORKFLOW, { n: 1 });
  const outcome = { id: "c_s1", status: "success", exportBytes: 0, dbWrites: {}, durationMs: 1 } as const;
  const result: WorkflowResult = {
    invocationId: run.invocationId,
    steps: [outcome],
    sends: [{ type: "emit", raw_event: { a: 1 } }],
    logs: [{ ts: 1, level: "log", message: "hello", step: "c_s1" }],
    response: { status: 201, headers: { "content-type": "text/plain" }, body: "made" },
    durationMs: 3,
  };

  it("names functions sluice-<stage>-<workflow id> on the sources' rules", () => {
    expect(workflowFunctionName("dev", WORKFLOW.workflowId)).toBe(WORKFLOW_NAME);
    expect(workflowFunctionName("a".repeat(32), WORKFLOW.workflowId)).toHaveLength(64);
    expect(() => workflowFunctionName("a".repeat(33), WORKFLOW.workflowId)).toThrow(/at most 64/);
  });

  it("creates the function with each distinct step module bundled once, and the sources' settings", async () => {
    lambdaMock
      .on(GetFunctionCommand)
      .rejectsOnce(notFound())
      .resolves({ Configuration: { ...settled, FunctionName: WORKFLOW_NAME } });
    lambdaMock.on(CreateFunctionCommand).resolves({});
    const bundled: string[] = [];
    const counting = async (code: string) => {
      bundled.push(code);
      return bundle(code);
    };
    await host({ bundle: counting }).prepareWorkflow(WORKFLOW);

    expect(bundled).toEqual([first.code, second.code]);
    const input = lambdaMock.commandCalls(CreateFunctionCommand)[0]!.args[0].input;
    expect({ ...input, Code: undefined }).toEqual({
      FunctionName: WORKFLOW_NAME,
      ...CREATED_SETTINGS,
      Description: `Sluice workflow ${WORKFLOW.workflowId}`,
      Tags: { "sluice:workflow": WORKFLOW.workflowId, "sluice:stage": "dev" },
      Code: undefined,
    });
    expect(input.Environment).toBeUndefined();
    expect(Buffer.from(input.Code!.ZipFile!).equals(Buffer.from(EXPECTED.zip))).toBe(true);
    expect(Object.keys(unzipSync(input.Code!.ZipFile!)).sort()).toEqual(
      ["index.mjs", `steps/${first.codeHash}.mjs`, `steps/${second.codeHash}.mjs`].sort(),
    );
  });

  it("uploads nothing for the same modules in another order, and new code when a step changes", async () => {
    const sha = Buffer.from(EXPECTED.sha256, "hex").toString("base64");
    lambdaMock.on(GetFunctionCommand).resolves({ Configuration: { ...settled, CodeSha256: sha } });
    lambdaMock.on(UpdateFunctionCodeCommand).resolves({});
    await host().prepareWorkflow({ ...WORKFLOW, steps: [second, first] });
    expect(lambdaMock.commandCalls(UpdateFunctionCodeCommand)).toHaveLength(0);
    expect(lambdaMock.commandCalls(CreateFunctionCommand)).toHaveLength(0);

    const changed = workflowCode(WORKFLOW.workflowId, [first.code, "export default defineComponent({ run() {} });"]);
    await host().prepareWorkflow(changed);
    const update = lambdaMock.commandCalls(UpdateFunctionCodeCommand)[0]!.args[0].input;
    expect(update.FunctionName).toBe(WORKFLOW_NAME);
    expect(Object.keys(unzipSync(update.ZipFile!))).toContain(`steps/${changed.steps[1]!.codeHash}.mjs`);
  });

  it("asks Lambda once per container for a probe's function (its code is fixed), again once invoking finds it gone, and always for a workflow's", async () => {
    lambdaMock
      .on(GetFunctionCommand)
      .rejectsOnce(notFound())
      .resolves({ Configuration: { ...settled } });
    lambdaMock.on(CreateFunctionCommand).resolves({});
    lambdaMock.on(InvokeCommand).rejects(notFound());
    const own = host();
    const probe = workflowCode(`p_${PROBE_ID_TIME}abcdefghjkmn`, [first.code]);
    const gets = () => lambdaMock.commandCalls(GetFunctionCommand).length;
    await own.prepareWorkflow(probe);
    const afterFirst = gets();
    await own.prepareWorkflow(probe);
    expect(gets()).toBe(afterFirst);
    await expect(own.invokeWorkflow(probe, workflowRun(probe))).rejects.toThrow(/not found/i);
    await own.prepareWorkflow(probe).catch(() => {});
    expect(gets()).toBeGreaterThan(afterFirst);
    // A real workflow's function is asked every time: another container may have changed it.
    const before = gets();
    await own.prepareWorkflow(WORKFLOW).catch(() => {});
    await own.prepareWorkflow(WORKFLOW).catch(() => {});
    expect(gets() - before).toBeGreaterThanOrEqual(2);
  });

  it("passes a bundling failure through without touching Lambda", async () => {
    const failing = host({ bundle: async () => Promise.reject(new Error("cannot install left-pad")) });
    await expect(failing.prepareWorkflow(WORKFLOW)).rejects.toThrow("cannot install left-pad");
    expect(lambdaMock.calls()).toHaveLength(0);
  });

  it("invokes the workflow's function synchronously with the run and returns its result, timed by the host", async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 200, Payload: encode(result) as never });
    const answer = await host().invokeWorkflow(WORKFLOW, run);
    const { Payload, ...rest } = lambdaMock.commandCalls(InvokeCommand)[0]!.args[0].input;
    expect(rest).toEqual({ FunctionName: WORKFLOW_NAME, InvocationType: "RequestResponse" });
    expect(JSON.parse(new TextDecoder().decode(Payload as Uint8Array))).toEqual(run);
    expect(answer).toEqual({ ...result, durationMs: 250 });
  });

  it.each([
    ["a source's result", { invocationId: run.invocationId, emits: [], dbWrites: {}, logs: [] }, "steps"],
    ["another run's result", { ...result, invocationId: "other" }, "invocationId"],
    ["a step that is not an object", { ...result, steps: ["forged"] }, "steps[0]"],
    ["no answer at all", null, "the result"],
  ])("fails the run on %s, applying none of it", async (_what, payload, problem) => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 200, Payload: encode(payload) as never });
    const answer = await host().invokeWorkflow(WORKFLOW, run);
    expect(answer).toMatchObject({ invocationId: run.invocationId, steps: [], sends: [], logs: [] });
    expect(answer.response).toBeUndefined();
    expect(answer.error).toMatchObject({ name: "SandboxError", message: expect.stringContaining(problem) });
  });

  it("reports a function that timed out as the run's error, with no step and nothing sent", async () => {
    lambdaMock.on(InvokeCommand).resolves({
      StatusCode: 200,
      FunctionError: "Unhandled",
      Payload: encode({ errorType: "Sandbox.Timedout", errorMessage: "Task timed out after 33.00 seconds" }) as never,
    });
    const answer = await host().invokeWorkflow(WORKFLOW, run);
    expect(answer).toMatchObject({ invocationId: run.invocationId, steps: [], sends: [], durationMs: 250 });
    expect(answer.error).toMatchObject({
      name: "TimeoutError",
      message: expect.stringMatching(/^the function was stopped/),
    });
  });

  it("throws when Lambda itself fails (the host's failure, not the workflow's)", async () => {
    lambdaMock.on(InvokeCommand).rejects(notFound());
    await expect(host().invokeWorkflow(WORKFLOW, run)).rejects.toThrow("Function not found");
  });

  it("deletes the workflow's function, and succeeds when it is already gone", async () => {
    lambdaMock.on(DeleteFunctionCommand).resolvesOnce({}).rejects(notFound());
    await host().removeWorkflow(WORKFLOW);
    await host().removeWorkflow(WORKFLOW);
    expect(lambdaMock.commandCalls(DeleteFunctionCommand).map((call) => call.args[0].input)).toEqual([
      { FunctionName: WORKFLOW_NAME },
      { FunctionName: WORKFLOW_NAME },
    ]);
  });
});
