/**
 * The program a sandbox child process runs. The host (`functions/adapters/local/process-pool-host.ts`)
 * bundles this file to plain JS and forks it under Node's permission model, with read access to
 * this file's folder and one owner's bundle folder only, and an empty environment.
 *
 * One child serves many requests at once over IPC (JSON): `describe` (the host kills the child after
 * the answer) and `invoke`/`invokes` (the child stays and serves sources of one owner; an owner may
 * have a few such children). What it sends in one tick goes as one `batch` message. It says `ready`
 * once it listens, `beat` every `SANDBOX_HEARTBEAT_MS` while its
 * event loop turns, `started` right before it runs an invocation's code and `exiting` when that
 * code ends the process: the host uses them to route around a blocked child and to tell which
 * invocation stopped it. It exits when the host goes away.
 */
import { pathToFileURL } from "node:url";
import { describeComponent } from "./describe-component.ts";
import type { InvocationResult } from "./protocol.ts";
import {
  componentExport,
  currentInvocationId,
  failCurrentInvocation,
  loadFailureResult,
  runInvocation,
} from "./run-invocation.ts";
import {
  type DescribeReply,
  type DescribeRequest,
  EVALUATING_HOOK,
  type InvokeRequest,
  SANDBOX_HEARTBEAT_MS,
  type SandboxMessage,
  type SandboxRequest,
  toLoadFailure,
} from "./sandbox-protocol.ts";

// Taken at start: component code running in this process may replace `process.send` later.
const post: (message: SandboxMessage) => void = (() => {
  const original = process.send?.bind(process);
  return (message: SandboxMessage) => {
    if (!original || !process.connected) return;
    original(message, undefined, {}, () => {
      // The host went away; `disconnect` ends this process.
    });
  };
})();
// Taken at start too, for the same reason.
const nextTick = process.nextTick.bind(process);
const immediately = setImmediate;

/**
 * Messages of this tick not written yet. They go out as one message at the end of the tick, or
 * sooner, in front of a `started` or `exiting`: nothing queued waits while code of an invocation
 * runs that may block or end the process. What a crash in between loses (a result queued in the
 * same tick) is run again elsewhere by the host.
 */
let queued: SandboxMessage[] = [];
let flushPending = false;

function flush(): void {
  flushPending = false;
  if (queued.length === 0) return;
  const messages = queued;
  queued = [];
  post(messages.length === 1 ? (messages[0] as SandboxMessage) : { type: "batch", messages });
}

/** Queues `message` for the end of this tick. */
function send(message: SandboxMessage): void {
  queued.push(message);
  if (flushPending) return;
  flushPending = true;
  nextTick(flush);
}

/** Writes `message`, after what is queued, before the caller goes on. */
function sendNow(message: SandboxMessage): void {
  queued.push(message);
  flush();
}

/** Writes `message` as a message of its own (`ready`, `described`). */
function sendAlone(message: SandboxMessage): void {
  flush();
  post(message);
}

/** Invocations the host took back before they started (see `CancelRequest`). */
const cancelled = new Set<string>();
const MAX_CANCELLED = 1000;
/**
 * An invocation whose start comes this late (the child was busy: code computing, a bundle loading)
 * first lets the channel be read: the host may have taken it back meanwhile to run it elsewhere.
 */
const STALLED_MS = SANDBOX_HEARTBEAT_MS;

/**
 * Resolves after the event loop's next poll phase, which reads what the host sent meanwhile. Code
 * that held the loop is followed at once by the continuations queued behind it, before any read.
 */
const afterNextRead = () => new Promise<void>((resolve) => immediately(() => immediately(resolve)));

/** Loads in progress: an error no invocation owns while one is pending fails the load. */
const pendingLoads = new Set<(thrown: unknown) => void>();
/** Bundles are content-addressed, so a path's module never changes. */
const modules = new Map<string, Promise<unknown>>();

/**
 * Bundle URL to the invocation that loads it. A local bundle calls the EVALUATING_HOOK global as
 * its top-level code starts: that code belongs to this invocation.
 */
const loading = new Map<string, string>();
(globalThis as Record<symbol, unknown>)[Symbol.for(EVALUATING_HOOK)] = (url: unknown) => {
  const invocationId = typeof url === "string" ? loading.get(url) : undefined;
  if (invocationId !== undefined) sendNow({ type: "started", invocationId });
};

function loadComponent(bundlePath: string, invocationId?: string): Promise<unknown> {
  let loaded = modules.get(bundlePath);
  if (!loaded) {
    const url = pathToFileURL(bundlePath).href;
    if (invocationId !== undefined) loading.set(url, invocationId);
    loaded = evaluate(bundlePath).finally(() => loading.delete(url));
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
  sendAlone({ type: "described", requestId: request.requestId, ...reply });
}

async function invoke(request: InvokeRequest): Promise<void> {
  const { invocation } = request;
  const { invocationId } = invocation;
  const started = performance.now();
  let result: InvocationResult;
  try {
    // A first load evaluates the module's top level: that is code of this invocation too.
    const component = await loadComponent(request.bundlePath, invocationId);
    if (performance.now() - started > STALLED_MS) await afterNextRead();
    if (cancelled.delete(invocationId)) return;
    // Sent last before the code runs (other invocations may have started while this one loaded).
    sendNow({ type: "started", invocationId });
    result = await runInvocation(component, invocation, {
      // At once: the code may go on to block its process, and the caller has its answer then.
      onRespond: (response) => sendNow({ type: "respond", invocationId, response }),
    });
  } catch (error) {
    result = loadFailureResult(invocationId, error, performance.now() - started);
  }
  cancelled.delete(invocationId);
  send({ type: "result", result });
}

/** libuv's EPERM, which `process.kill` turns into an `EPERM` error. */
const UV_EPERM = -1;

/**
 * Code that ends its own process says which invocation it belongs to first: the host then blames
 * that invocation alone and runs the others again elsewhere. Code can still end the process in ways
 * not seen here (running out of memory, a native crash); the host then guesses (the `started` order).
 *
 * Signals go to this process only: Node's permission model does not cover `process.kill`, and the
 * parent (Sluice itself) and its process group must be out of reach. `process.kill` sends through
 * `process._kill`, which answers an errno; EPERM makes it throw `kill EPERM`.
 */
function guardProcess(): void {
  const reportExit = () => {
    const invocationId = currentInvocationId();
    if (invocationId !== undefined) sendNow({ type: "exiting", invocationId });
  };
  const own = process as unknown as Record<"exit" | "reallyExit" | "abort", (...args: unknown[]) => never> & {
    _kill(pid: number, signal: number): number;
  };
  for (const name of ["exit", "reallyExit", "abort"] as const) {
    const original = own[name].bind(process);
    own[name] = (...args: unknown[]) => {
      reportExit();
      return original(...args);
    };
  }
  const kill = own._kill.bind(process);
  own._kill = (pid: number, signal: number) => {
    if (pid !== process.pid) return UV_EPERM;
    if (signal !== 0) reportExit();
    return kill(pid, signal);
  };
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

function startInvocation(request: Partial<InvokeRequest> | null): void {
  if (typeof request?.bundlePath === "string" && request.invocation) void invoke(request as InvokeRequest);
  else process.stderr.write("sluice sandbox: malformed invocation\n");
}

process.on("uncaughtException", onStrayError);
process.on("unhandledRejection", onStrayError);
process.on("disconnect", () => process.exit(0));
process.on("message", (message: unknown) => {
  const request = message as Partial<SandboxRequest> | null;
  if (request?.type === "describe" && typeof request.requestId === "string" && typeof request.bundlePath === "string") {
    void describe(request as DescribeRequest);
  } else if (request?.type === "invoke") {
    startInvocation(request);
  } else if (request?.type === "invokes" && Array.isArray(request.requests)) {
    for (const each of request.requests as unknown[]) startInvocation(each as Partial<InvokeRequest> | null);
  } else if (request?.type === "cancel" && typeof request.invocationId === "string") {
    // Bounded: a cancel that comes after its invocation ended is never taken out again.
    if (cancelled.size >= MAX_CANCELLED) cancelled.delete(cancelled.values().next().value as string);
    cancelled.add(request.invocationId);
  } else {
    process.stderr.write("sluice sandbox: unknown request\n");
  }
});
guardProcess();
// Unreferenced: the IPC channel keeps the child alive, and only as long as the host is there.
setInterval(() => send({ type: "beat" }), SANDBOX_HEARTBEAT_MS).unref();
sendAlone({ type: "ready" });
