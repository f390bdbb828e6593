/**
 * The program a sandbox child process runs. The host (`functions/adapters/local/process-pool-host.ts`)
 * bundles this file to plain JS and forks it under Node's permission model, with read access to
 * this file's folder and one owner's bundle folder only, and an empty environment.
 *
 * One child serves many requests at once over IPC (JSON): `describe` (the host kills the child after
 * the answer) and `invoke` (the child stays and serves every source of one owner). It says `ready`
 * once it listens, and exits when the host goes away.
 */
import { pathToFileURL } from "node:url";
import { describeComponent } from "./describe-component.ts";
import type { InvocationResult } from "./protocol.ts";
import { componentExport, failCurrentInvocation, loadFailureResult, runInvocation } from "./run-invocation.ts";
import {
  type DescribeReply,
  type DescribeRequest,
  type InvokeRequest,
  type SandboxMessage,
  type SandboxRequest,
  toLoadFailure,
} from "./sandbox-protocol.ts";

// Taken at start: component code running in this process may replace `process.send` later.
const send: (message: SandboxMessage) => void = (() => {
  const original = process.send?.bind(process);
  return (message: SandboxMessage) => {
    if (!original || !process.connected) return;
    original(message, undefined, {}, () => {
      // The host went away; `disconnect` ends this process.
    });
  };
})();

/** Loads in progress: an error no invocation owns while one is pending fails the load. */
const pendingLoads = new Set<(thrown: unknown) => void>();
/** Bundles are content-addressed, so a path's module never changes. */
const modules = new Map<string, Promise<unknown>>();

function loadComponent(bundlePath: string): Promise<unknown> {
  let loaded = modules.get(bundlePath);
  if (!loaded) {
    loaded = evaluate(bundlePath);
    modules.set(bundlePath, loaded);
    // Not cached when it failed: a stray error of other code may have been blamed on it.
    loaded.catch(() => modules.delete(bundlePath));
  }
  return loaded;
}

function evaluate(bundlePath: string): Promise<unknown> {
  return new Promise<unknown>((resolve, reject) => {
    pendingLoads.add(reject);
    import(pathToFileURL(bundlePath).href)
      .then(componentExport)
      .then(resolve, reject)
      .finally(() => pendingLoads.delete(reject));
  });
}

async function describe(request: DescribeRequest): Promise<void> {
  let reply: DescribeReply;
  try {
    reply = { ok: true, description: describeComponent(await loadComponent(request.bundlePath)) };
  } catch (error) {
    reply = { ok: false, error: toLoadFailure(error) };
  }
  send({ type: "described", requestId: request.requestId, ...reply });
}

async function invoke(request: InvokeRequest): Promise<void> {
  const { invocation } = request;
  const started = performance.now();
  let result: InvocationResult;
  try {
    const component = await loadComponent(request.bundlePath);
    result = await runInvocation(component, invocation, {
      onRespond: (response) => send({ type: "respond", invocationId: invocation.invocationId, response }),
    });
  } catch (error) {
    result = loadFailureResult(invocation.invocationId, error, performance.now() - started);
  }
  send({ type: "result", result });
}

function onStrayError(thrown: unknown): void {
  if (failCurrentInvocation(thrown)) return;
  if (pendingLoads.size > 0) {
    for (const fail of pendingLoads) fail(thrown);
    return;
  }
  // Not attributable (a late callback of a finished invocation, or module top-level code):
  // logged, and the child keeps serving the other sources.
  process.stderr.write(`sluice sandbox: uncaught error outside any invocation: ${String(thrown)}\n`);
}

process.on("uncaughtException", onStrayError);
process.on("unhandledRejection", onStrayError);
process.on("disconnect", () => process.exit(0));
process.on("message", (message: unknown) => {
  const request = message as Partial<SandboxRequest> | null;
  if (request?.type === "describe" && typeof request.requestId === "string" && typeof request.bundlePath === "string") {
    void describe(request as DescribeRequest);
  } else if (request?.type === "invoke" && typeof request.bundlePath === "string" && request.invocation) {
    void invoke(request as InvokeRequest);
  } else {
    process.stderr.write("sluice sandbox: unknown request\n");
  }
});
send({ type: "ready" });
