/**
 * `ComponentHost` on AWS (DESIGN.md decision 4): each deployed source runs in its own Lambda
 * function, `sluice-<stage>-<source id>`, on Node.js 22 (arm64) with the Sluice runtime layer and a
 * role that may only write logs. Its code is the component bundle plus a tiny entry
 * (`source-bundle.ts`), zipped reproducibly, so re-deploying unchanged code uploads nothing. A
 * workflow is one function too, `sluice-<stage>-<workflow id>`, with the same settings: its step
 * modules and an entry naming them by code hash (`workflow-bundle.ts`), every step of a run in one
 * synchronous invocation.
 *
 * `describe` cannot evaluate code in the API function: it sends the bundle to the describer
 * function (`functions/internal/describer.ts`), which evaluates it in a sandboxed child process.
 *
 * Differences from the local host, by design: the HTTP response of `respond(...)` is handed over
 * when the run ends (a Lambda invocation answers once), and `durationMs` is the time this host
 * waited for the function, which the component cannot forge.
 */
import {
  CreateFunctionCommand,
  DeleteFunctionCommand,
  type FunctionConfiguration,
  GetFunctionCommand,
  InvokeCommand,
  type InvokeCommandOutput,
  type LambdaClient,
  UpdateFunctionCodeCommand,
  UpdateFunctionConfigurationCommand,
  waitUntilFunctionActiveV2,
  waitUntilFunctionUpdatedV2,
} from "@aws-sdk/client-lambda";
import { invalidCode } from "#adapters/component-compile-error";
import { PROBE_ID_TIME } from "#config/shared-names";
import type { ComponentDescription } from "#core/component-model";
import { notFound } from "#core/errors";
import { type Clock, systemClock } from "#core/ports/clock";
import type {
  ComponentHost,
  InvokeHandlers,
  PrepareOptions,
  SourceCode,
  WorkflowCode,
} from "#core/ports/component-host";
import { type Logger, silentLogger } from "#core/ports/logger";
import type { ErrorRecord, Invocation, InvocationResult, WorkflowInvocation, WorkflowResult } from "#runtime/protocol";
import {
  malformedError,
  type Parsed,
  parseDescribeReply,
  parseInvocationResult,
  parseWorkflowResult,
} from "#runtime/protocol-parsers";
import { failedResult } from "#runtime/run-invocation";
import { failedWorkflowResult } from "#runtime/run-workflow";
import { withPosition } from "#runtime/sandbox-channel";
import { hasErrorName } from "./sdk-errors.ts";
import { SOURCE_HANDLER, type SourceZip, sourceZip } from "./source-bundle.ts";
import { workflowZip } from "./workflow-bundle.ts";

/** Lambda's limit on a synchronous invocation's request and response. */
const MAX_SYNC_PAYLOAD_BYTES = 6 * 1024 * 1024;
const MAX_FUNCTION_NAME = 64;

/** What `describe` and `prepare` need; functions that only run or remove sources are deployed without it. */
export interface SourceDeploySettings {
  /** Name of the describer function (`SLUICE_DESCRIBER_FUNCTION`). */
  readonly describerFunction: string;
  /** Turns a component's code into its ESM bundle: `componentBundler(...)` of `source-bundle.ts`. */
  readonly bundle: (code: string) => Promise<string>;
  /**
   * What creating a function needs; functions that only describe components are deployed without
   * it (nor the rights to create functions). @default - `prepare` and `prepareWorkflow` throw
   */
  readonly functions?: SourceFunctionsSettings;
}

/** The settings of the source and workflow functions `prepare` creates. */
export interface SourceFunctionsSettings {
  /** Execution role of source functions, which may only write logs (`SLUICE_SOURCE_ROLE_ARN`). */
  readonly sourceRoleArn: string;
  /** Version ARN of the runtime layer (`SLUICE_RUNTIME_LAYER_ARN`). */
  readonly runtimeLayerArn: string;
  /** Log group of all source functions (`SLUICE_SOURCE_LOG_GROUP`). @default - Lambda's `/aws/lambda/<name>` */
  readonly logGroup?: string;
}

export interface LambdaComponentHostOptions {
  readonly lambda: LambdaClient;
  /** Stage of the deployment (`SLUICE_STAGE`); part of every function name. */
  readonly stage: string;
  /** Time limit of one invocation (`RuntimeSettings.invocationTimeoutMs`); the function gets 3 s more. */
  readonly invocationTimeoutMs: number;
  /** @default - `describe` and `prepare` throw: this function may only invoke sources */
  readonly deploy?: SourceDeploySettings;
  /** @default 256 */
  readonly memoryMb?: number;
  /** How long to wait for a function to become active or finish updating (API routes have 30 s). @default 20 */
  readonly waitSeconds?: number;
  /** @default systemClock */
  readonly clock?: Clock;
  /** @default silentLogger */
  readonly log?: Logger;
}

/** The name of a source's function, `sluice-<stage>-<source id>`, at most 64 characters. */
export function sourceFunctionName(stage: string, sourceId: string): string {
  const name = `sluice-${stage}-${sourceId}`;
  if (name.length > MAX_FUNCTION_NAME || !/^[A-Za-z0-9_-]+$/.test(name)) {
    throw new Error(`"${name}" is not a valid Lambda function name (letters, digits, - and _, at most 64)`);
  }
  return name;
}

/**
 * The name of a workflow's function, `sluice-<stage>-<workflow id>` (`p_…`), on the same rules:
 * the stack's grants name `sluice-<stage>-p_*` beside `sluice-<stage>-dc_*`.
 */
export function workflowFunctionName(stage: string, workflowId: string): string {
  return sourceFunctionName(stage, workflowId);
}

/** The settings every source function has; `prepare` re-applies them when they drift. */
interface SourceFunctionSettings {
  Role: string;
  Handler: string;
  Runtime: "nodejs22.x";
  Layers: string[];
  MemorySize: number;
  Timeout: number;
  LoggingConfig?: { LogFormat: "Text"; LogGroup: string };
}

/** How the answer of a source's or a workflow's function is read, and what its failure is. */
interface RunKind<R> {
  readonly name: "source" | "workflow";
  readonly parse: (raw: unknown, invocationId: string) => Parsed<R>;
  readonly failed: (invocationId: string, error: ErrorRecord, durationMs: number) => R;
}

const SOURCE_RUNS: RunKind<InvocationResult> = { name: "source", parse: parseInvocationResult, failed: failedResult };
const WORKFLOW_RUNS: RunKind<WorkflowResult> = {
  name: "workflow",
  parse: parseWorkflowResult,
  failed: failedWorkflowResult,
};

/** The error payload Lambda returns with `FunctionError`. */
interface LambdaErrorPayload {
  errorType?: string;
  errorMessage?: string;
  trace?: string[];
}

function parseJson(bytes: Uint8Array | undefined): unknown {
  if (!bytes || bytes.length === 0) return undefined;
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
}

/**
 * The invocation with its run's data store grant, when it has stores: the function cannot message
 * this host while it runs, so its runtime sends each call over HTTP with the grant
 * (docs/data-stores.md "On AWS"). `handlers.dataStore` is then not used.
 */
async function withDataStoreGrant<T extends Invocation | WorkflowInvocation>(
  invocation: T,
  handlers: Pick<InvokeHandlers, "dataStoreGrant"> | undefined,
): Promise<T> {
  const grant = await handlers?.dataStoreGrant?.();
  return grant ? { ...invocation, dataStoreGrant: grant } : invocation;
}

/** What a function is deployed with besides its name and code: the settings, its tags, a deadline. */
type FunctionDeployRest = [
  deploy: { functions: SourceFunctionsSettings },
  created: { Description: string; Tags: Record<string, string> },
  readyByMs?: number,
];

/**
 * Whether `FunctionName` is a probe's (a dynamic props probe source, or an action run on its own):
 * its id has a time part of 0 (`PROBE_ID_TIME`), and its code is fixed by the component it is
 * derived from, which never changes under one id.
 */
const isProbeFunction = (FunctionName: string) =>
  FunctionName.includes(`-dc_${PROBE_ID_TIME}`) || FunctionName.includes(`-p_${PROBE_ID_TIME}`);

export class LambdaComponentHost implements ComponentHost {
  readonly #options: LambdaComponentHostOptions;
  readonly #clock: Clock;
  readonly #log: Logger;
  /**
   * The code (zip SHA-256) of the probe functions this container brought up to date. A probe's
   * code never changes under its name, and this container's settings are the stack's, so asking
   * Lambda again on every configure or run action (a `GetFunction`, tens of ms) tells nothing new;
   * forgotten when invoking one finds it gone. Source and workflow functions are always asked:
   * another container may have deployed other code since.
   */
  readonly #probesUpToDate = new Map<string, string>();

  constructor(options: LambdaComponentHostOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#log = options.log ?? silentLogger;
  }

  functionName(sourceId: string): string {
    return sourceFunctionName(this.#options.stage, sourceId);
  }

  async describe(code: string): Promise<ComponentDescription> {
    const deploy = this.#deploySettings();
    const bundle = await deploy.bundle(code);
    const payload = JSON.stringify({ kind: "describe", code: bundle });
    if (Buffer.byteLength(payload) > MAX_SYNC_PAYLOAD_BYTES) {
      throw invalidCode(`the bundled component is larger than ${MAX_SYNC_PAYLOAD_BYTES / 1024 / 1024} MiB`);
    }
    const out = await this.#options.lambda.send(
      new InvokeCommand({
        FunctionName: deploy.describerFunction,
        InvocationType: "RequestResponse",
        Payload: new TextEncoder().encode(payload),
      }),
    );
    const body = parseJson(out.Payload);
    if (out.FunctionError) {
      const { errorType, errorMessage } = (body ?? {}) as LambdaErrorPayload;
      throw invalidCode(`the component could not be loaded: ${lambdaFailure(errorType, errorMessage).message}`);
    }
    // The describer already checked its child's answer with the same parser: a malformed reply
    // here is a bug of the describer, not the component's doing.
    const reply = parseDescribeReply(body);
    if (!reply.ok) throw new Error(`the describer function answered a malformed reply (${reply.problem})`);
    if (reply.value.ok) return reply.value.description;
    throw invalidCode(withPosition(reply.value.error));
  }

  async prepare(source: SourceCode, options: PrepareOptions = {}): Promise<"pending" | undefined> {
    const deploy = this.#functionSettings();
    const zip = sourceZip(await deploy.bundle(source.code));
    const FunctionName = this.functionName(source.sourceId);
    const outcome = await this.#deployFunction(
      FunctionName,
      zip,
      deploy,
      {
        Description: `Sluice source ${source.sourceId}`,
        Tags: { "sluice:source": source.sourceId, "sluice:stage": this.#options.stage },
      },
      options.readyByMs,
    );
    this.#log.info(`source function ${outcome}`, { source_id: source.sourceId, function: FunctionName });
    return outcome === "pending" ? "pending" : undefined;
  }

  /**
   * Creates the function of `FunctionName` with `zip`, or brings an existing one up to date: its
   * code when the zip differs, its settings when they drifted. Says which it did.
   */
  async #deployFunction(
    FunctionName: string,
    code: SourceZip,
    ...rest: FunctionDeployRest
  ): Promise<"created" | "updated" | "pending"> {
    if (this.#probesUpToDate.get(FunctionName) === code.sha256) return "updated";
    const outcome = await this.#bringUpToDate(FunctionName, code, ...rest);
    if (outcome !== "pending" && isProbeFunction(FunctionName)) this.#probesUpToDate.set(FunctionName, code.sha256);
    return outcome;
  }

  async #bringUpToDate(
    FunctionName: string,
    { zip, sha256 }: SourceZip,
    ...[deploy, created, readyByMs]: FunctionDeployRest
  ): Promise<"created" | "updated" | "pending"> {
    const settings = this.#settings(deploy.functions);
    let current = await this.#getFunction(FunctionName);
    if (!current) {
      try {
        await this.#options.lambda.send(
          new CreateFunctionCommand({
            FunctionName,
            ...settings,
            Architectures: ["arm64"],
            PackageType: "Zip",
            Code: { ZipFile: zip },
            ...created,
          }),
        );
        return (await this.#waitActive(FunctionName, readyByMs)) ? "created" : "pending";
      } catch (error) {
        // Another deploy of the same source or workflow created it first: update that one instead.
        if (!hasErrorName(error, "ResourceConflictException")) throw error;
        current = await this.#getFunction(FunctionName);
        if (!current) throw error;
      }
    }
    // A function still being created or updated refuses further updates until it is done.
    if (current.State === "Pending" && !(await this.#waitActive(FunctionName, readyByMs))) return "pending";
    if (current.LastUpdateStatus === "InProgress" && !(await this.#waitUpdated(FunctionName, readyByMs))) {
      return "pending";
    }
    if (current.CodeSha256 !== Buffer.from(sha256, "hex").toString("base64")) {
      await this.#options.lambda.send(
        new UpdateFunctionCodeCommand({ FunctionName, ZipFile: zip, Architectures: ["arm64"] }),
      );
      await this.#waitUpdated(FunctionName);
    }
    if (settingsDiffer(current, settings)) {
      await this.#options.lambda.send(
        new UpdateFunctionConfigurationCommand({ FunctionName, ...settings, Environment: { Variables: {} } }),
      );
      await this.#waitUpdated(FunctionName);
    }
    return "updated";
  }

  /**
   * Runs a source's invocation in its function. A function that does not exist was deleted with
   * its source (by a `DELETE` racing the request that runs this, a hook of a second `DELETE`):
   * "source not found", as the request would answer after the deletion.
   */
  async invoke(source: SourceCode, invocation: Invocation, handlers?: InvokeHandlers): Promise<InvocationResult> {
    const sent = await withDataStoreGrant(invocation, handlers);
    let result: InvocationResult;
    try {
      result = await this.#run(SOURCE_RUNS, source.sourceId, this.functionName(source.sourceId), sent);
    } catch (error) {
      if (hasErrorName(error, "ResourceNotFoundException")) throw notFound("source");
      throw error;
    }
    if (result.response) handlers?.onRespond?.(result.response);
    return result;
  }

  /**
   * Runs `invocation` in `FunctionName` and answers its result as `kind` parses it, timed by this
   * host. What the function did (a failure Lambda reports, a malformed or forged answer) is the
   * run's error in a failed result of that kind.
   */
  async #run<R>(
    kind: RunKind<R>,
    ownerId: string,
    FunctionName: string,
    invocation: Invocation | WorkflowInvocation,
  ): Promise<R> {
    const answer = await this.#invokeFunction(FunctionName, invocation).catch((error: unknown) => {
      // Gone (deleted by hand, or by a stack's removal): the next `prepare` makes it again.
      if (hasErrorName(error, "ResourceNotFoundException")) this.#probesUpToDate.delete(FunctionName);
      throw error;
    });
    if ("failure" in answer) {
      return kind.failed(invocation.invocationId, { ...answer.failure, ts: this.#clock.nowMs() }, answer.durationMs);
    }
    const parsed = kind.parse(answer.body, invocation.invocationId);
    if (!parsed.ok) {
      this.#log.warn(`${kind.name} function sent a malformed result`, {
        [`${kind.name}_id`]: ownerId,
        problem: parsed.problem,
      });
      const error = malformedError("result", parsed.problem, this.#clock.nowMs());
      return kind.failed(invocation.invocationId, error, answer.durationMs);
    }
    return { ...parsed.value, durationMs: answer.durationMs };
  }

  /**
   * Invokes `FunctionName` synchronously with `invocation` and answers what came back: the body of
   * its answer, or the failure Lambda reported for the function (a timeout, out of memory, a
   * crash, an answer over Lambda's limit), with the time this host waited, which the code cannot
   * forge. Throws only when Lambda itself fails.
   */
  async #invokeFunction(
    FunctionName: string,
    invocation: Invocation | WorkflowInvocation,
  ): Promise<
    { body: unknown; durationMs: number } | { failure: { name: string; message: string }; durationMs: number }
  > {
    const started = this.#clock.nowMs();
    const command = new InvokeCommand({
      FunctionName,
      InvocationType: "RequestResponse",
      Payload: new TextEncoder().encode(JSON.stringify(invocation)),
    });
    let out: InvokeCommandOutput;
    try {
      out = await this.#options.lambda.send(command);
    } catch (error) {
      // A function still being created or updated refuses invocations for a moment.
      if (!hasErrorName(error, "ResourceConflictException")) throw error;
      await this.#waitUpdated(FunctionName);
      out = await this.#options.lambda.send(command);
    }
    const durationMs = Math.max(0, this.#clock.nowMs() - started);
    const body = parseJson(out.Payload);
    if (out.FunctionError) {
      const { errorType, errorMessage } = (body ?? {}) as LambdaErrorPayload;
      return { failure: lambdaFailure(errorType, errorMessage), durationMs };
    }
    return { body, durationMs };
  }

  async remove(source: Pick<SourceCode, "sourceId" | "ownerId">): Promise<void> {
    await this.#deleteFunction(this.functionName(source.sourceId));
  }

  workflowFunctionName(workflowId: string): string {
    return workflowFunctionName(this.#options.stage, workflowId);
  }

  /**
   * Creates or updates the workflow's function: each distinct step module bundled (one at a time,
   * as locally: esbuild is busy enough when a workflow of 50 new steps is saved), zipped with the
   * entry of `workflow-bundle.ts`, with the sources' role, layer, memory and time limit.
   */
  async prepareWorkflow(workflow: WorkflowCode): Promise<void> {
    const deploy = this.#functionSettings();
    const modules = new Map<string, string>();
    for (const step of workflow.steps) {
      if (!modules.has(step.codeHash)) modules.set(step.codeHash, await deploy.bundle(step.code));
    }
    const zip = workflowZip([...modules].map(([codeHash, bundle]) => ({ codeHash, bundle })));
    const FunctionName = this.workflowFunctionName(workflow.workflowId);
    const outcome = await this.#deployFunction(FunctionName, zip, deploy, {
      Description: `Sluice workflow ${workflow.workflowId}`,
      Tags: { "sluice:workflow": workflow.workflowId, "sluice:stage": this.#options.stage },
    });
    this.#log.info(`workflow function ${outcome}`, {
      workflow_id: workflow.workflowId,
      deployment_id: workflow.deploymentId,
      function: FunctionName,
    });
  }

  /** Runs one run of the workflow in its function, every step in one synchronous invocation. */
  async invokeWorkflow(
    workflow: WorkflowCode,
    invocation: WorkflowInvocation,
    handlers?: Pick<InvokeHandlers, "dataStoreGrant">,
  ): Promise<WorkflowResult> {
    const FunctionName = this.workflowFunctionName(workflow.workflowId);
    return this.#run(WORKFLOW_RUNS, workflow.workflowId, FunctionName, await withDataStoreGrant(invocation, handlers));
  }

  async removeWorkflow(workflow: Pick<WorkflowCode, "workflowId" | "ownerId">): Promise<void> {
    await this.#deleteFunction(this.workflowFunctionName(workflow.workflowId));
  }

  async #deleteFunction(FunctionName: string): Promise<void> {
    try {
      await this.#options.lambda.send(new DeleteFunctionCommand({ FunctionName }));
    } catch (error) {
      if (!hasErrorName(error, "ResourceNotFoundException")) throw error;
    }
  }

  #deploySettings(): SourceDeploySettings {
    const { deploy } = this.#options;
    if (!deploy) {
      throw new Error("this function was deployed without the settings to deploy sources (access.compute)");
    }
    return deploy;
  }

  /** {@link #deploySettings}, with what creating functions needs. */
  #functionSettings(): SourceDeploySettings & { functions: SourceFunctionsSettings } {
    const deploy = this.#deploySettings();
    if (!deploy.functions) {
      throw new Error(
        "this function was deployed to describe components only, without the settings to create functions (access.compute)",
      );
    }
    return { ...deploy, functions: deploy.functions };
  }

  #settings(deploy: SourceFunctionsSettings): SourceFunctionSettings {
    const settings: SourceFunctionSettings = {
      Role: deploy.sourceRoleArn,
      Handler: SOURCE_HANDLER,
      Runtime: "nodejs22.x",
      Layers: [deploy.runtimeLayerArn],
      MemorySize: this.#options.memoryMb ?? 256,
      // Lambda stops the function only as a last resort: the runtime ends a run that is too long
      // itself, with what it did so far.
      Timeout: Math.ceil(this.#options.invocationTimeoutMs / 1000) + 3,
    };
    if (deploy.logGroup) settings.LoggingConfig = { LogFormat: "Text", LogGroup: deploy.logGroup };
    return settings;
  }

  async #getFunction(FunctionName: string): Promise<FunctionConfiguration | undefined> {
    try {
      const out = await this.#options.lambda.send(new GetFunctionCommand({ FunctionName }));
      return out.Configuration;
    } catch (error) {
      if (hasErrorName(error, "ResourceNotFoundException")) return undefined;
      throw error;
    }
  }

  /**
   * The waiters' settings: at most `waitSeconds`, and no later than `readyByMs` when given (a
   * request that must answer by then; at least 2 s, as a waiter's longest wait must exceed its
   * 1 s delay).
   */
  #waiter(readyByMs?: number) {
    const most = this.#options.waitSeconds ?? 20;
    const left = readyByMs === undefined ? most : Math.floor((readyByMs - this.#clock.nowMs()) / 1000);
    return { client: this.#options.lambda, maxWaitTime: Math.max(2, Math.min(most, left)), minDelay: 1, maxDelay: 5 };
  }

  /** Waits until the function is active: true; false when `readyByMs` came first. */
  async #waitActive(FunctionName: string, readyByMs?: number): Promise<boolean> {
    return this.#waitFor(() => waitUntilFunctionActiveV2(this.#waiter(readyByMs), { FunctionName }), readyByMs);
  }

  async #waitUpdated(FunctionName: string, readyByMs?: number): Promise<boolean> {
    return this.#waitFor(() => waitUntilFunctionUpdatedV2(this.#waiter(readyByMs), { FunctionName }), readyByMs);
  }

  async #waitFor(wait: () => Promise<unknown>, readyByMs: number | undefined): Promise<boolean> {
    try {
      await wait();
      return true;
    } catch (error) {
      // Out of the caller's time, not the waiter's own: the function is made, a later prepare waits.
      if (readyByMs !== undefined && hasErrorName(error, "TimeoutError")) return false;
      throw error;
    }
  }
}

function settingsDiffer(current: FunctionConfiguration, wanted: SourceFunctionSettings): boolean {
  return (
    current.Role !== wanted.Role ||
    current.Handler !== wanted.Handler ||
    current.Runtime !== wanted.Runtime ||
    current.MemorySize !== wanted.MemorySize ||
    current.Timeout !== wanted.Timeout ||
    JSON.stringify((current.Layers ?? []).map((layer) => layer.Arn)) !== JSON.stringify(wanted.Layers) ||
    (wanted.LoggingConfig !== undefined && current.LoggingConfig?.LogGroup !== wanted.LoggingConfig.LogGroup) ||
    Object.keys(current.Environment?.Variables ?? {}).length > 0
  );
}

/** What Lambda reports when the function itself failed: a timeout, out of memory, a crash. */
function lambdaFailure(
  errorType: string | undefined,
  errorMessage: string | undefined,
): { name: string; message: string } {
  const message = errorMessage ?? "the function failed without a message";
  if (errorType === "Sandbox.Timedout" || /Task timed out/.test(message)) {
    return { name: "TimeoutError", message: `the function was stopped: ${message}` };
  }
  if (errorType === "Runtime.OutOfMemory" || /out of memory/i.test(message)) {
    return { name: "OutOfMemoryError", message: `the function ran out of memory: ${message}` };
  }
  return { name: errorType ?? "Error", message };
}
