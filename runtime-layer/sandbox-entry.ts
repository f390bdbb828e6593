/**
 * The program a sandbox child process runs. The host (`functions/adapters/local/process-pool-host.ts`)
 * bundles this file to plain JS and spawns it under Node's permission model, with read access to
 * this file's folder and one bundle folder only (one source's, or one describe's), an empty
 * environment, and one JSON argument ({@link SandboxChildConfig}).
 *
 * It reads requests as lines of JSON on fd 3 and writes its messages as lines on fd 4
 * (`sandbox-channel.ts`): `describe` (the host kills the child after the answer) and `invoke`
 * (the child stays and serves one source or one workflow, many invocations at a time; a workflow
 * run is told apart by `invocation.kind`, and its step modules are loaded once each, by code hash). What it sends in one tick
 * goes as one write. It says `ready` once it listens, `beat` every `SANDBOX_HEARTBEAT_MS` while
 * it has work and its event loop turns (every `SANDBOX_IDLE_HEARTBEAT_MS` when idle), `started`
 * right before it runs an invocation's code and `exiting` when
 * that code ends the process: the host uses them to route around a blocked child and to tell
 * which invocation stopped it. It exits when the host goes away.
 */
import { closeSync, promises as fsPromises, writeSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import net, { Server, Socket } from "node:net";
import os from "node:os";
import traceEvents from "node:trace_events";
import { pathToFileURL } from "node:url";
import v8 from "node:v8";
import type { DataStoreCaller } from "./data-store-client.ts";
import { describeComponent } from "./describe-component.ts";
import { installComponentGlobals } from "./globals.ts";
import { installLazySourceMaps } from "./lazy-source-maps.ts";
import type { DataStoreReply, ErrorRecord, InvocationResult, LogRecord, WorkflowResult } from "./protocol.ts";
import { parseInvocation, parseWorkflowInvocation } from "./protocol-parsers.ts";
import {
  componentExport,
  currentInvocationId,
  failCurrentInvocation,
  failedResult,
  loadFailureResult,
  runInvocation,
} from "./run-invocation.ts";
import { failedWorkflowResult, runWorkflowSteps } from "./run-workflow.ts";
import {
  type DescribeReply,
  type DescribeRequest,
  EVALUATING_HOOK,
  type InvokeRequest,
  LineDecoder,
  MAX_MESSAGE_BYTES,
  MESSAGE_FD,
  pathRedactor,
  REQUEST_FD,
  SANDBOX_HEARTBEAT_MS,
  SANDBOX_IDLE_HEARTBEAT_MS,
  type SandboxChildConfig,
  type SandboxMessage,
  type SandboxRequest,
  type SourceInvokeRequest,
  toLoadFailure,
  type WorkflowInvokeRequest,
} from "./sandbox-channel.ts";
import { mapTmpFolder, tmpPaths } from "./tmp-folder.ts";

const config = readConfig();
// First, before any component code can run: descriptors the host leaked to this process (its own,
// inherited without close-on-exec from whatever started it) are not the component's to read.
for (const fd of config.close) {
  try {
    closeSync(fd);
  } catch {
    // Already closed.
  }
}
// The host starts this process with an empty environment, through a shell (for its memory cap,
// `sandbox-process.ts`) that may add its own variables (`PWD`): none of them is the component's.
for (const name of Object.keys(process.env)) delete process.env[name];
const tmp = config.tmp === undefined ? undefined : tmpPaths(config.tmp, config.redact);
const redactPaths = pathRedactor(config.redact);
/** `text` without the server's paths, its `/tmp` folder named `/tmp`. */
const redact = tmp === undefined ? redactPaths : (text: string) => redactPaths(tmp.toShown(text));
// Before any component code is loaded: `/tmp/...` names the folder this process may write to.
if (config.tmp !== undefined) mapTmpFolder(config.tmp, config.redact);
// Before any module is evaluated: a code step's `export default defineComponent({...})` describes
// and runs without an import, as in the original.
installComponentGlobals();
// Stack frames name the user's files and lines, the maps read only when a stack needs one.
installLazySourceMaps();

function readConfig(): SandboxChildConfig {
  try {
    const parsed = JSON.parse(process.argv[2] ?? "{}") as Partial<SandboxChildConfig>;
    return {
      close: Array.isArray(parsed.close) ? parsed.close.filter((fd) => Number.isInteger(fd) && fd > MESSAGE_FD) : [],
      redact: Array.isArray(parsed.redact) ? parsed.redact.filter((path) => typeof path === "string") : [],
      ...(typeof parsed.tmp === "string" && parsed.tmp.startsWith("/") ? { tmp: parsed.tmp } : {}),
    };
  } catch {
    return { close: [], redact: [] };
  }
}

// Taken at start: component code running in this process may replace these later.
const nextTick = process.nextTick.bind(process);
const immediately = setImmediate;
const every = setInterval;
const stopEvery = clearInterval;
const stringify = JSON.stringify;
const byteLength = Buffer.byteLength;

/** Waits ~1 ms without the event loop (a write that found the pipe full, see `writeAll`). */
const pause = () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);

/**
 * Writes `text` to the host before returning. fd 4 is a blocking socket, so a write waits while the
 * host has not read what came before; code that made it non-blocking (by opening a socket on it)
 * gets EAGAIN, which is waited out too.
 */
function writeAll(text: string): void {
  lastWrite = performance.now();
  let bytes = Buffer.from(text);
  while (bytes.length > 0) {
    try {
      bytes = bytes.subarray(writeSync(MESSAGE_FD, bytes));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN") return; // The host went away.
      pause();
    }
  }
}

/** One message as its line; a result too large for the host is replaced by its error. */
function lineOf(message: SandboxMessage): string {
  const line = stringify(message);
  // A UTF-8 encoding has at most 3 bytes per UTF-16 unit: the exact count only when it matters.
  if (line.length * 3 <= MAX_MESSAGE_BYTES || byteLength(line) <= MAX_MESSAGE_BYTES) return `${line}\n`;
  if (message.type !== "result") return "";
  const { invocationId, durationMs } = message.result;
  const workflow = isWorkflowResult(message.result);
  const error: ErrorRecord = {
    name: "ResultTooLargeError",
    message: `the invocation's result is over ${MAX_MESSAGE_BYTES / 1024 / 1024} MiB (${workflow ? "sends, logs and db writes" : "emits, logs and db writes"} together)`,
    ts: Date.now(),
  };
  const result = workflow
    ? failedWorkflowResult(invocationId, error, durationMs)
    : failedResult(invocationId, error, durationMs);
  return `${stringify({ type: "result", result })}\n`;
}

const isWorkflowResult = (result: InvocationResult | WorkflowResult): result is WorkflowResult => "steps" in result;

/**
 * Messages of this tick not written yet. They go out as one write at the end of the tick, or
 * sooner, in front of a `started` or `exiting`: nothing queued waits while code of an invocation
 * runs that may block or end the process. What a crash in between loses (a result queued in the
 * same tick) is run again elsewhere by the host.
 */
let queued: SandboxMessage[] = [];
let flushPending = false;
/** `started` messages among them (see `runWorkflow`). */
let queuedStarts = 0;

function flush(): void {
  flushPending = false;
  queuedStarts = 0;
  if (queued.length === 0) return;
  const messages = queued;
  queued = [];
  let text = "";
  for (const message of messages) text += lineOf(message);
  writeAll(text);
}

/** Queues `message` for the end of this tick. */
function send(message: SandboxMessage): void {
  queued.push(message);
  if (flushPending) return;
  flushPending = true;
  nextTick(flush);
}

function queueStarted(invocationId: string): void {
  queuedStarts++;
  send({ type: "started", invocationId });
}

/** Passes a loaded step module on, after writing any `started` still queued: its code runs next. */
function beforeStepCode<T>(loaded: T): T {
  if (queuedStarts > 0) flush();
  return loaded;
}

/** Writes `message`, after what is queued, before the caller goes on. */
function sendNow(message: SandboxMessage): void {
  queued.push(message);
  flush();
}

/** Requests received and not answered yet: while there are any, the child beats often. */
let inFlight = 0;
let beats: NodeJS.Timeout | undefined;
/** When the child last wrote to the host: any message says it is alive, so a beat is needed only after a silence. */
let lastWrite = 0;

function beatEvery(ms: number): void {
  if (beats !== undefined) stopEvery(beats);
  beats = every(() => {
    if (performance.now() - lastWrite >= ms / 2) send({ type: "beat" });
  }, ms);
  // Unreferenced: the request channel keeps the child alive, and only as long as the host is there.
  beats.unref();
}

function changeInFlight(delta: number): void {
  const before = inFlight;
  inFlight += delta;
  if (before === 0 && inFlight > 0) beatEvery(SANDBOX_HEARTBEAT_MS);
  else if (before > 0 && inFlight === 0) beatEvery(SANDBOX_IDLE_HEARTBEAT_MS);
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
/**
 * Loaded modules: a source's by bundle path, a workflow step's by code hash. Bundles are
 * content-addressed, so the module a key names never changes.
 */
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

function loadComponent(bundlePath: string, invocationId?: string, key = bundlePath): Promise<unknown> {
  let loaded = modules.get(key);
  if (!loaded) {
    const url = pathToFileURL(bundlePath).href;
    if (invocationId !== undefined) {
      loading.set(url, invocationId);
      // Parsing and compiling a large bundle (a registry component with axios inlined) holds
      // this process before its top-level code starts: that silence is this invocation's, so the host keeps it here as the one blocking rather than moving it to
      // another cold child that would block the same way (decision 326).
      sendNow({ type: "started", invocationId });
    }
    loaded = evaluate(bundlePath).finally(() => loading.delete(url));
    modules.set(key, loaded);
    // Not cached when it failed: a stray error of other code may have been blamed on it.
    loaded.catch(() => modules.delete(key));
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
  changeInFlight(1);
  let reply: DescribeReply;
  try {
    reply = { ok: true, description: describeComponent(await loadComponent(request.bundlePath)) };
  } catch (error) {
    const failure = toLoadFailure(error);
    reply = { ok: false, error: { ...failure, message: redact(failure.message) } };
  }
  sendNow({ type: "described", requestId: request.requestId, ...reply });
  changeInFlight(-1);
}

async function invoke(request: InvokeRequest): Promise<void> {
  changeInFlight(1);
  try {
    if (request.invocation.kind === "workflow") await runWorkflow(request as WorkflowInvokeRequest);
    else await answer(request as SourceInvokeRequest);
  } finally {
    changeInFlight(-1);
  }
}

async function answer(request: SourceInvokeRequest): Promise<void> {
  const { invocation } = request;
  const { invocationId } = invocation;
  const started = performance.now();
  let result: InvocationResult;
  let running = false;
  try {
    // A first load evaluates the module's top level: that is code of this invocation too.
    const component = await loadComponent(request.bundlePath, invocationId);
    if (performance.now() - started > STALLED_MS) await afterNextRead();
    if (cancelled.delete(invocationId)) return;
    // Sent last before the code runs (other invocations may have started while this one loaded).
    sendNow({ type: "started", invocationId });
    running = true;
    result = await runInvocation(component, invocation, {
      // At once: the code may go on to block its process, and the caller has its answer then.
      onRespond: (response) => sendNow({ type: "respond", invocationId, response }),
      dataStore: dataStoreCaller(invocationId),
    });
  } catch (error) {
    result = loadFailureResult(invocationId, error, performance.now() - started);
  }
  cancelled.delete(invocationId);
  // The host takes a result only after its `started`: a load that failed before the bundle's code
  // ran (or a cached failure) says so now, in the same write.
  if (!running) send({ type: "started", invocationId });
  send({ type: "result", result: redacted(result) });
}

/** Each step module's bundle path, by code hash, as the host gave them (once each: sandbox-channel.ts). */
const knownStepBundles = new Map<string, string>();

/**
 * Runs one run of a workflow. Its step modules load through a loader keyed by code hash, once per
 * process (the bundle paths of one hash in two deployments' folders hold the same code), when a
 * run first reaches a step using one; a module that fails to load fails that step, and loads
 * afresh on the next run. `runWorkflowSteps` never rejects.
 */
async function runWorkflow(request: WorkflowInvokeRequest): Promise<void> {
  const { invocation, stepBundles } = request;
  const { invocationId } = invocation;
  for (const [module, path] of Object.entries(stepBundles)) knownStepBundles.set(module, path);
  // Nothing loads before the run starts (steps load as it reaches them), so unlike a source's
  // invocation it cannot have stalled here; a cancel read with it still counts.
  if (cancelled.delete(invocationId)) return;
  // Queued, not written at once: a step's code runs only after its module's load was awaited, and
  // the loader writes what is queued first (`beforeStepCode`). The runs of one batch then say
  // `started` in one write rather than one each, and each still before any of their code runs.
  queueStarted(invocationId);
  const result = await runWorkflowSteps(
    (module) => {
      const bundlePath = knownStepBundles.get(module);
      if (bundlePath === undefined) return Promise.reject(new Error(`no step module ${module} in this workflow`));
      return loadComponent(bundlePath, invocationId, `step:${module}`).then(beforeStepCode);
    },
    invocation,
    dataStoreCaller(invocationId),
  );
  cancelled.delete(invocationId);
  send({ type: "result", result: redactedWorkflow(result) });
}

/** Data store calls sent and not answered yet, by call id. */
const dataStoreCalls = new Map<number, { invocationId: string; resolve: (reply: DataStoreReply) => void }>();
let lastCallId = 0;

/**
 * Sends an invocation's data store calls to the host, which answers each on the request channel.
 * Queued like any message: calls made in one tick go as one write.
 */
function dataStoreCaller(invocationId: string): DataStoreCaller {
  return (call) =>
    new Promise<DataStoreReply>((resolve) => {
      const callId = ++lastCallId;
      dataStoreCalls.set(callId, { invocationId, resolve });
      send({ type: "data_store", invocationId, callId, call });
    });
}

/** A reply to a call this runtime sent; one to a call forged by component code (another invocation) is dropped. */
function onDataStoreReply(invocationId: unknown, callId: unknown, reply: unknown): void {
  const pending = typeof callId === "number" ? dataStoreCalls.get(callId) : undefined;
  if (!pending || pending.invocationId !== invocationId || typeof reply !== "object" || reply === null) return;
  dataStoreCalls.delete(callId as number);
  pending.resolve(reply as DataStoreReply);
}

/** The result without the server's paths in its error and logs (stacks name `component.ts`). */
function redacted(result: InvocationResult): InvocationResult {
  if (result.error) result.error = redactError(result.error);
  redactLogs(result.logs);
  return result;
}

function redactedWorkflow(result: WorkflowResult): WorkflowResult {
  if (result.error) result.error = redactError(result.error);
  for (const step of result.steps) if (step.error) step.error = redactError(step.error);
  redactLogs(result.logs);
  return result;
}

function redactLogs(logs: LogRecord[]): void {
  for (const [index, log] of logs.entries()) {
    const message = redact(log.message);
    if (message !== log.message) logs[index] = { ...log, message };
  }
}

function redactError(error: ErrorRecord): ErrorRecord {
  const clean: ErrorRecord = { ...error, message: redact(error.message) };
  if (error.stack !== undefined) clean.stack = redact(error.stack);
  return clean;
}

/** libuv's EPERM, which `process.kill` turns into an `EPERM` error. */
const UV_EPERM = -1;

/**
 * Code that ends its own process says which invocation it belongs to first: the host then blames
 * that invocation alone and runs the others again elsewhere. Code can still end the process in ways
 * not seen here (running out of memory, a native crash); the host then guesses (the `started` order).
 *
 * Signals and priorities concern this process only: Node's permission model covers neither
 * `process.kill` nor `os.setPriority`, and the parent (Sluice itself) and its process group must be
 * out of reach. `process.kill` sends through `process._kill`, which answers an errno; EPERM makes it
 * throw `kill EPERM`. `process.binding('os')`, the other way to the priority calls, is closed by
 * the permission model.
 *
 * `process._debugProcess(pid)` sends SIGUSR1 to any process of the same user, and a Node process
 * not under the permission model (Sluice itself) opens its inspector on 127.0.0.1:9229 for it:
 * code that then connects runs in that process with all of Sluice's rights. It is refused here
 * (the server also ignores SIGUSR1: `bin/cli/commands/local.ts`).
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
  refuseProcessCall("_debugProcess", (pid) => sandboxRefusal("kill", `start a debugger (pid ${String(pid)})`));
  guardPriority();
  guardSockets();
  guardIdentity();
  guardDiagnostics();
  guardFileHandles();
  // `import { setPriority } from "node:os"` and the like read the ES modules' own copies.
  syncBuiltinESMExports();
}

/** An `EPERM` error of `call`, saying what a sandbox process may not do. */
const sandboxRefusal = (call: string, what: string) =>
  Object.assign(new Error(`${call} EPERM: a sandbox process may not ${what}`), { code: "EPERM", syscall: call });

/** Replaces `process[name]`, for good, by a function that throws `refusal(firstArgument)`. */
function refuseProcessCall(name: string, refusal: (first: unknown) => Error): void {
  Object.defineProperty(process, name, {
    value: (first: unknown) => {
      throw refusal(first);
    },
    writable: false,
    configurable: false,
  });
}

/**
 * A Sluice run as root (documented as unwise) would let code take any user's identity, and with it
 * that user's processes and files where the permission model does not reach (decision 495).
 */
function guardIdentity(): void {
  for (const name of ["setuid", "setgid", "seteuid", "setegid", "setgroups", "initgroups"] as const) {
    if (typeof (process as unknown as Record<string, unknown>)[name] === "function") {
      refuseProcessCall(name, () => sandboxRefusal(name, "change its user or groups"));
    }
  }
}

/**
 * V8's flags at run time reach what the permission model does not: `--allow-natives-syntax` opens
 * V8's internal functions to code compiled afterwards, some of which can crash or corrupt the
 * process (decision 489). Tracing writes `node_trace.<n>.log` files into the working dir (Sluice's)
 * for as long as it is on, a write the permission model does not see (decision 496).
 */
function guardDiagnostics(): void {
  v8.setFlagsFromString = () => {
    throw sandboxRefusal("v8.setFlagsFromString", "change V8's flags");
  };
  traceEvents.createTracing = () => {
    throw sandboxRefusal("trace_events.createTracing", "trace to files");
  };
}

/**
 * Node 20's permission model does not check `FileHandle.utimes`: a handle opened for reading on any
 * file the process may read (the runtime's entry, its own bundle) could change that file's times,
 * which the host's sweep of old bundles reads (decision 553). `fs.utimes` and `fs.futimes` are
 * checked; the handle's method is refused, on the prototype every handle shares, as the first
 * handle is opened (Node keeps the class to itself).
 */
function guardFileHandles(): void {
  const promises = fsPromises as unknown as Record<string, unknown>;
  const open = promises.open as (...args: unknown[]) => Promise<object>;
  let guarded = false;
  promises.open = async function (this: unknown, ...args: unknown[]) {
    const handle = await Reflect.apply(open, this, args);
    if (!guarded) {
      guarded = true;
      Object.defineProperty(Object.getPrototypeOf(handle), "utimes", {
        value: () =>
          Promise.reject(sandboxRefusal("utimes", "change a file's times through a FileHandle: use fs.utimes")),
        writable: false,
        configurable: false,
      });
    }
    return handle;
  };
}

/**
 * No Unix socket, and no listening at all: Node 20's permission model leaves both open (like the
 * network). A socket file reaches what a TCP port does not, as the user Sluice runs as: a
 * database's peer authentication, Docker's API, a desktop's session bus (decision 488). A listening
 * socket would let code accept connections on the machine's interfaces, Sluice's host turned into
 * a server of the component's (decision 497); components receive events through Sluice. A connect
 * to a path, or any listen, fails as `EACCES` on the socket's `error` event, the way a refused one
 * does; outgoing TCP is untouched. Node's own connects and listens (`http`, `tls`, `http2`,
 * `net.createConnection`) all go through these two methods, and `listen` through `_listen2` and
 * the handle maker `net._createServerHandle`, both public and both guarded too (decision 501);
 * Node's bindings are closed by the permission model.
 */
function guardSockets(): void {
  /** The socket path of `connect`'s or `listen`'s arguments, as Node reads them (an IPC path wins over a port). */
  const pathOf = (args: unknown[]): string | undefined => {
    const first = Array.isArray(args[0]) ? args[0][0] : args[0];
    if (typeof first === "string") return Number(first) >= 0 ? undefined : first;
    const path = typeof first === "object" && first !== null ? (first as { path?: unknown }).path : undefined;
    return path ? String(path) : undefined;
  };
  /**
   * Replaces `proto[name]` by one that refuses the calls `refused` names a reason for (`fail`
   * reports the error) and passes anything else on.
   */
  const guard = <T extends object>(
    proto: T,
    name: "connect" | "listen" | "_listen2",
    refused: (args: unknown[]) => string | undefined,
    fail: (self: T, error: Error) => void,
  ) => {
    type Method = (...args: unknown[]) => unknown;
    const original = (proto as Record<string, Method>)[name] as Method;
    Object.defineProperty(proto, name, {
      value: function (this: T, ...args: unknown[]) {
        const why = refused(args);
        if (why === undefined) return Reflect.apply(original, this, args);
        const error = Object.assign(new Error(`${name} EACCES: a sandbox process may not ${why}`), {
          code: "EACCES",
          syscall: name,
        });
        nextTick(() => fail(this, error));
        return this;
      },
      // Left replaceable: a library that wraps it wraps this one, and Node's own is reachable
      // through it only.
      writable: true,
      configurable: true,
    });
  };
  guard(
    Socket.prototype,
    "connect",
    (args) => {
      const path = pathOf(args);
      return path === undefined ? undefined : `use a Unix socket (${path})`;
    },
    (socket, error) => socket.destroy(error),
  );
  guard(
    Server.prototype,
    "listen",
    (args) => {
      const path = pathOf(args);
      return path === undefined ? "accept connections" : `use a Unix socket (${path})`;
    },
    (server, error) => server.emit("error", error),
  );
  // `listen`'s last step, still exported under its legacy name: called directly, it listened on any
  // port or socket path past the guard above.
  guard(
    Server.prototype,
    "_listen2",
    () => "accept connections",
    (server, error) => server.emit("error", error),
  );
  // And the handle maker under both, exported for the cluster module: it bound and listened on a
  // port or a socket path (writing the socket file) with no `Server` at all. Refused as Node's
  // own refusals read: an errno.
  Object.defineProperty(net, "_createServerHandle", {
    value: () => -os.constants.errno.EACCES,
    writable: false,
    configurable: false,
  });
}

/** `os.setPriority` and `os.getPriority` of this process only (pid omitted, 0 or its own). */
function guardPriority(): void {
  const { setPriority, getPriority } = os;
  const refuse = (call: string, pid: unknown) =>
    sandboxRefusal(call, `use another process's priority (pid ${String(pid)})`);
  const isOwn = (pid: unknown) => pid === undefined || pid === 0 || pid === process.pid;
  os.setPriority = ((pid: unknown, priority?: unknown) => {
    if (priority === undefined) return setPriority(pid as number);
    if (!isOwn(pid)) throw refuse("setPriority", pid);
    return setPriority(0, priority as number);
  }) as typeof os.setPriority;
  os.getPriority = ((pid?: unknown) => {
    if (!isOwn(pid)) throw refuse("getPriority", pid);
    return getPriority(0);
  }) as typeof os.getPriority;
}

function onStrayError(thrown: unknown): void {
  if (failCurrentInvocation(thrown)) return;
  if (pendingLoads.size > 0) {
    for (const fail of pendingLoads) fail(thrown);
    return;
  }
  // Not attributable (a late callback of a finished invocation, or module top-level code):
  // logged, and the child keeps serving its source.
  process.stderr.write(`sluice sandbox: uncaught error outside any invocation: ${redact(String(thrown))}\n`);
}

function onRequest(line: string): void {
  let request: Partial<SandboxRequest> | null;
  try {
    request = JSON.parse(line) as Partial<SandboxRequest> | null;
  } catch {
    request = null;
  }
  if (request?.type === "describe" && typeof request.requestId === "string" && typeof request.bundlePath === "string") {
    void describe(request as DescribeRequest);
  } else if (request?.type === "invoke" && isWorkflowRequest(request)) {
    const invocation = parseWorkflowInvocation(request.invocation);
    if (invocation.ok) void invoke({ type: "invoke", stepBundles: request.stepBundles, invocation: invocation.value });
    else refuseInvocation(request.invocation, invocation.problem, true);
  } else if (request?.type === "invoke" && "bundlePath" in request && typeof request.bundlePath === "string") {
    const invocation = parseInvocation(request.invocation);
    if (invocation.ok) void invoke({ type: "invoke", bundlePath: request.bundlePath, invocation: invocation.value });
    else refuseInvocation(request.invocation, invocation.problem, false);
  } else if (request?.type === "data_store_reply") {
    onDataStoreReply(request.invocationId, request.callId, request.reply);
  } else if (request?.type === "cancel" && typeof request.invocationId === "string") {
    // Bounded: a cancel that comes after its invocation ended is never taken out again.
    if (cancelled.size >= MAX_CANCELLED) cancelled.delete(cancelled.values().next().value as string);
    cancelled.add(request.invocationId);
  } else {
    process.stderr.write("sluice sandbox: unknown request\n");
  }
}

/** A workflow run's request: its invocation says `kind: "workflow"`, and it names its step bundles. */
function isWorkflowRequest(request: Partial<SandboxRequest>): request is Partial<WorkflowInvokeRequest> & {
  stepBundles: Record<string, string>;
} {
  const { invocation, stepBundles } = request as Partial<WorkflowInvokeRequest>;
  if ((invocation as { kind?: unknown } | undefined)?.kind !== "workflow") return false;
  if (typeof stepBundles !== "object" || stepBundles === null || Array.isArray(stepBundles)) return false;
  return Object.values(stepBundles).every((path) => typeof path === "string");
}

/**
 * Answers an invocation the host sent malformed (a bug of the host) as the Lambda entry does: the
 * run fails with a TypeError saying what is wrong. Without an id to answer to, only stderr hears.
 */
function refuseInvocation(raw: unknown, problem: string, workflow: boolean): void {
  const invocationId = (raw as { invocationId?: unknown } | null)?.invocationId;
  const message = `invalid ${workflow ? "workflow " : ""}invocation: ${problem}`;
  if (typeof invocationId !== "string") {
    process.stderr.write(`sluice sandbox: ${message}\n`);
    return;
  }
  const error: ErrorRecord = { name: "TypeError", message, ts: Date.now() };
  send({ type: "started", invocationId });
  send({
    type: "result",
    result: workflow ? failedWorkflowResult(invocationId, error, 0) : failedResult(invocationId, error, 0),
  });
}

function listen(): void {
  // The host is trusted: no limit on what it sends.
  const decoder = new LineDecoder(Number.POSITIVE_INFINITY);
  const requests = new Socket({ fd: REQUEST_FD, readable: true, writable: false });
  requests.setEncoding("utf8");
  requests.on("data", (chunk: string) => {
    for (const line of decoder.push(chunk)) onRequest(line);
  });
  // The host went away (or code closed the channel): nothing more will come.
  const leave = () => process.exit(0);
  requests.on("end", leave);
  requests.on("close", leave);
  requests.on("error", leave);
}

process.on("uncaughtException", onStrayError);
process.on("unhandledRejection", onStrayError);
guardProcess();
listen();
beatEvery(SANDBOX_IDLE_HEARTBEAT_MS);
sendNow({ type: "ready" });
