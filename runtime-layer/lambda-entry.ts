/**
 * The runtime of a deployed source on AWS. The service stack bundles this file into the runtime
 * layer as `/opt/nodejs/sluice-runtime.mjs`; each source's function holds only its component
 * bundle and a three-line entry (`functions/adapters/aws/source-bundle.ts`):
 *
 *   import { createSourceHandler } from "/opt/nodejs/sluice-runtime.mjs";
 *   export const handler = createSourceHandler(() => import("./component.mjs"));
 *
 * The event is an {@link Invocation}; the handler's return value is the {@link InvocationResult}.
 * A `respond(...)` of the code is not sent on its own: it travels in `result.response`, so on AWS
 * the HTTP answer is given when the run ends (a Lambda function answers once per invocation).
 *
 * Component code is untrusted and gets nothing it could misuse: the function's role may only write
 * its logs, its environment has no Sluice variables, and the role's credentials, which Lambda puts
 * in the environment, are removed before the code loads.
 */
import type { DataStoreCaller } from "./data-store-client.ts";
import { installComponentGlobals } from "./globals.ts";
import {
  type DataStoreGrant,
  type DataStoreReply,
  type Invocation,
  type InvocationResult,
  isFileStoreCall,
  type WorkflowInvocation,
  type WorkflowResult,
} from "./protocol.ts";
import { parseInvocation, parseWorkflowInvocation } from "./protocol-parsers.ts";
import { componentExport, failCurrentInvocation, loadFailureResult, runInvocation } from "./run-invocation.ts";
import { runWorkflowSteps } from "./run-workflow.ts";

export type SourceHandler = (event: unknown) => Promise<InvocationResult>;

/** Loads the component's module; the entry passes `() => import("./component.mjs")`. */
export type ComponentLoader = () => Promise<unknown>;

/**
 * Set by Lambda from the execution role. The runtime interface client does not need them (it talks
 * to the local Runtime API), and component code must not have them.
 */
const CREDENTIAL_VARIABLES = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"];

let processPrepared = false;

/**
 * Once per process: scrub credentials, map stack frames through the component's inline source map
 * (turned on before the component's file is read, which is why the entry imports it lazily), and
 * take over errors nobody caught. Lambda's runtime client would report those as a failure of the
 * whole invocation and end the process, losing what the run emitted and logged before; here they
 * end the invocation they belong to, as in the local sandbox.
 */
function prepareProcess(): void {
  if (processPrepared) return;
  processPrepared = true;
  for (const name of CREDENTIAL_VARIABLES) delete process.env[name];
  process.setSourceMapsEnabled(true);
  installComponentGlobals();
  for (const event of ["uncaughtException", "unhandledRejection"] as const) {
    process.removeAllListeners(event);
    process.on(event, (thrown: unknown) => {
      if (failCurrentInvocation(thrown)) return;
      // Not attributable (a late callback of an earlier run): logged, the function keeps serving.
      process.stderr.write(`sluice runtime: uncaught error outside any invocation: ${String(thrown)}\n`);
    });
  }
}

/** The invocation trusted code sent; a malformed event is a bug of the host, so it throws. */
function invocationOf(event: unknown): Invocation {
  const parsed = parseInvocation(event);
  if (!parsed.ok) throw new TypeError(`invalid invocation: ${parsed.problem}`);
  return parsed.value;
}

/**
 * The Lambda handler of a source function. The module is loaded once per process (a function
 * serves one source); a module that fails to load fails each invocation with a `LoadError` in
 * its result, never a Lambda error.
 */
export function createSourceHandler(load: ComponentLoader): SourceHandler {
  prepareProcess();
  let loaded: Promise<unknown> | undefined;
  return async (event) => {
    const invocation = invocationOf(event);
    const started = performance.now();
    let component: unknown;
    try {
      loaded ??= load().then(componentExport);
      component = await loaded;
    } catch (error) {
      loaded = undefined;
      return loadFailureResult(invocation.invocationId, error, performance.now() - started);
    }
    // The response travels in the result: a Lambda function answers once per invocation.
    return runInvocation(component, invocation, {
      onRespond() {},
      dataStore: grantedCaller(invocation.dataStoreGrant),
    });
  };
}

export type WorkflowHandler = (event: unknown) => Promise<WorkflowResult>;

/**
 * The Lambda handler of a workflow function: one loader per step module, keyed by code hash
 * (`{"<hash>": () => import("./steps/<hash>.mjs")}`, docs/design/workflows.md §3.2). Each module
 * is loaded once per process, when a run first reaches its step; a module that fails to load
 * fails that step with a `LoadError`, and is tried again by the next run.
 */
export function createWorkflowHandler(loaders: Record<string, ComponentLoader>): WorkflowHandler {
  prepareProcess();
  const loaded = new Map<string, Promise<unknown>>();
  const load = (module: string): Promise<unknown> => {
    const loader = Object.hasOwn(loaders, module) ? loaders[module] : undefined;
    if (!loader) return Promise.reject(new Error(`no step module ${module} in this function`));
    let component = loaded.get(module);
    if (!component) {
      component = loader().then(componentExport);
      component.catch(() => loaded.delete(module));
      loaded.set(module, component);
    }
    return component;
  };
  return async (event) => {
    const invocation = workflowInvocationOf(event);
    return runWorkflowSteps(load, invocation, grantedCaller(invocation.dataStoreGrant));
  };
}

/** Taken when the runtime loads: component code may replace the global later. */
const post = globalThis.fetch;

/**
 * Sends a run's data store calls to trusted code over HTTP, with the run's grant
 * (docs/data-stores.md "On AWS"). Never rejects: a broker that cannot be reached or answers
 * something else is the call's `DataStoreError`.
 */
export function grantedCaller(grant: DataStoreGrant | undefined): DataStoreCaller | undefined {
  if (!grant) return undefined;
  return async (call) => {
    // A `$.files` call's failure is the File Store's, named as the component would look for it.
    const files = isFileStoreCall(call);
    const refused = (message: string): DataStoreReply => ({
      ok: false,
      error: { name: files ? "FileStoreError" : "DataStoreError", message },
    });
    const service = files ? "the File Store service" : "the data store service";
    try {
      const response = await post(grant.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ grant: grant.grant, call }),
      });
      const reply = (await response.json()) as Partial<DataStoreReply> | null;
      if (reply?.ok === true) return reply as DataStoreReply;
      if (reply?.ok === false && typeof reply.error?.message === "string") return reply as DataStoreReply;
      return refused(`${service} answered ${response.status}`);
    } catch (error) {
      return refused(`${service} could not be reached: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
}

/** The workflow invocation trusted code sent; a malformed event is a bug of the host, so it throws. */
function workflowInvocationOf(event: unknown): WorkflowInvocation {
  const parsed = parseWorkflowInvocation(event);
  if (!parsed.ok) throw new TypeError(`invalid workflow invocation: ${parsed.problem}`);
  return parsed.value;
}
