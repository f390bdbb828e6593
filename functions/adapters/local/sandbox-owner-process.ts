/**
 * One long-lived sandbox child serving every source of one owner, many invocations at a time.
 * It turns whatever happens to the child (an answer, a timeout, a crash) into exactly one
 * {@link InvocationResult} per invocation.
 */
import type { InvokeHandlers } from "#ports/component-host";
import type {
  EmitRecord,
  ErrorRecord,
  HttpResponseSpec,
  Invocation,
  InvocationResult,
  Json,
  LogRecord,
} from "#runtime/protocol";
import { failedResult, normalizeResponse, toEmitMeta } from "#runtime/run-invocation";
import type { InvokeRequest, SandboxMessage } from "#runtime/sandbox-protocol";
import { crashReason, forkSandbox, isOutOfMemory, isRunning, type SandboxProcess } from "./sandbox-process.ts";

/**
 * Time an invocation gets beyond its own `timeoutMs` before its process is killed. The runtime
 * answers a TimeoutError by itself unless the code blocks the event loop; starting the child
 * counts against the invocation too.
 */
const KILL_GRACE_MS = 1000;

export interface SandboxOwnerProcessOptions {
  readonly entryPath: string;
  /** The owner's bundle folder, the only one the child may read besides the entry's. */
  readonly ownerDir: string;
  readonly heapMb: number;
  /** Killed after this long without an invocation in flight. */
  readonly idleMs: number;
  /** Called once, when the process stops taking invocations (killed, reaped or exited). */
  onRetired(): void;
}

interface Pending {
  readonly request: InvokeRequest;
  readonly handlers: InvokeHandlers | undefined;
  readonly resolve: (result: InvocationResult) => void;
  readonly startedAt: number;
  timer?: NodeJS.Timeout;
  /** The response passed to `onRespond`, normalised; the result carries the same. */
  response?: HttpResponseSpec;
}

type Refable = { ref?(): void; unref?(): void } | null | undefined;

export class SandboxOwnerProcess {
  private readonly sandbox: SandboxProcess;
  private readonly pending = new Map<string, Pending>();
  private readonly exited: Promise<void>;
  private ready = false;
  private retired = false;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: SandboxOwnerProcessOptions) {
    this.sandbox = forkSandbox(options.entryPath, options.ownerDir, options.heapMb);
    const { child } = this.sandbox;
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    child.on("message", (message: SandboxMessage | null) => this.onMessage(message));
    child.once("exit", (code, signal) => this.onExit(code, signal));
    child.on("error", (error) => this.onError(error));
  }

  get pid(): number | undefined {
    return this.sandbox.child.pid;
  }

  /** False once the process was killed or exited: the pool then starts another. */
  get accepting(): boolean {
    return !this.retired;
  }

  /** Runs one invocation; never rejects. */
  invoke(bundlePath: string, invocation: Invocation, handlers?: InvokeHandlers): Promise<InvocationResult> {
    const startedAt = performance.now();
    const { invocationId } = invocation;
    if (this.retired || this.pending.has(invocationId)) {
      const why = this.retired ? "the sandbox process has stopped" : "an invocation with this id is running";
      return Promise.resolve(failed(invocation, "SandboxError", why, startedAt));
    }
    clearTimeout(this.idleTimer);
    this.setRef(true);
    return new Promise<InvocationResult>((resolve) => {
      const entry: Pending = {
        request: { type: "invoke", bundlePath, invocation },
        handlers,
        resolve,
        startedAt,
      };
      this.pending.set(invocationId, entry);
      entry.timer = setTimeout(() => this.timeOut(invocationId), invocation.timeoutMs + KILL_GRACE_MS);
      if (this.ready) this.send(entry);
    });
  }

  /** Kills the process; in-flight invocations end with a SandboxError saying `why`. */
  kill(why: string): Promise<void> {
    this.retire();
    for (const id of [...this.pending.keys()]) this.fail(id, "SandboxError", why);
    const { child } = this.sandbox;
    if (child.pid === undefined || !isRunning(child)) return Promise.resolve();
    child.kill("SIGKILL");
    return this.exited;
  }

  private send(entry: Pending): void {
    try {
      this.sandbox.child.send(entry.request, (error) => {
        // The channel is closing: the exit handler ends the invocation with the reason.
        if (error && !this.retired) this.kill(`the sandbox process could not be reached: ${error.message}`);
      });
    } catch (error) {
      this.fail(
        entry.request.invocation.invocationId,
        "SandboxError",
        `could not send the invocation: ${String(error)}`,
      );
    }
  }

  private onMessage(message: SandboxMessage | null): void {
    if (message?.type === "ready") {
      this.ready = true;
      for (const entry of this.pending.values()) this.send(entry);
    } else if (message?.type === "respond") {
      this.forwardRespond(message.invocationId, message.response);
    } else if (message?.type === "result") {
      const id = (message.result as Partial<InvocationResult> | null)?.invocationId;
      const entry = typeof id === "string" ? this.pending.get(id) : undefined;
      if (entry) this.settle(entry, checkedResult(message.result, entry));
    }
  }

  private forwardRespond(invocationId: unknown, response: unknown): void {
    const entry = typeof invocationId === "string" ? this.pending.get(invocationId) : undefined;
    if (!entry || entry.response) return;
    entry.response = checkedResponse(response);
    if (entry.response) entry.handlers?.onRespond?.(entry.response);
  }

  private timeOut(invocationId: string): void {
    const entry = this.pending.get(invocationId);
    if (!entry) return;
    const { timeoutMs } = entry.request.invocation;
    this.fail(
      invocationId,
      "TimeoutError",
      `the invocation timed out after ${timeoutMs / 1000}s; its process was killed`,
    );
    void this.kill("the sandbox process was restarted because another invocation in it timed out");
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.retire();
    if (this.pending.size === 0) return;
    const stderr = this.sandbox.stderrTail();
    const name = isOutOfMemory(stderr) ? "OutOfMemoryError" : "SandboxCrashError";
    const why = `the sandbox process stopped: ${crashReason(code, signal, stderr)}`;
    for (const id of [...this.pending.keys()]) this.fail(id, name, why);
  }

  private onError(error: Error): void {
    void this.kill(`the sandbox process failed: ${error.message}`);
  }

  private fail(invocationId: string, name: string, message: string): void {
    const entry = this.pending.get(invocationId);
    if (entry) this.settle(entry, failed(entry.request.invocation, name, message, entry.startedAt));
  }

  private settle(entry: Pending, result: InvocationResult): void {
    const { invocationId } = entry.request.invocation;
    if (this.pending.get(invocationId) !== entry) return;
    this.pending.delete(invocationId);
    clearTimeout(entry.timer);
    entry.resolve(result);
    if (this.pending.size === 0 && !this.retired) {
      this.idleTimer = setTimeout(() => void this.kill("the sandbox process was idle"), this.options.idleMs);
      this.idleTimer.unref();
      this.setRef(false);
    }
  }

  private retire(): void {
    if (this.retired) return;
    this.retired = true;
    clearTimeout(this.idleTimer);
    this.options.onRetired();
  }

  /** An idle child must not keep this process alive; a busy one must, until its answer. */
  private setRef(on: boolean): void {
    const { child } = this.sandbox;
    for (const handle of [child, child.channel, child.stdout, child.stderr] as Refable[]) {
      if (on) handle?.ref?.();
      else handle?.unref?.();
    }
  }
}

function failed(invocation: Invocation, name: string, message: string, startedAt: number): InvocationResult {
  return failedResult(invocation.invocationId, { name, message, ts: Date.now() }, performance.now() - startedAt);
}

/** Normalised again: the child runs untrusted code, which can send anything. Malformed is no response. */
function checkedResponse(response: unknown): HttpResponseSpec | undefined {
  try {
    return normalizeResponse(response);
  } catch {
    return undefined;
  }
}

type Bag = Record<string, unknown>;
const isBag = (value: unknown): value is Bag => typeof value === "object" && value !== null && !Array.isArray(value);
const LOG_LEVELS = new Set(["log", "info", "warn", "error", "debug"]);

/**
 * The child's result with every field of the expected type. The runtime in the child builds it
 * correctly, but the code running beside it can send a result of its own.
 */
function checkedResult(raw: unknown, entry: Pending): InvocationResult {
  const { invocation } = entry.request;
  const sent = isBag(raw) ? raw : {};
  const result: InvocationResult = {
    invocationId: invocation.invocationId,
    emits: Array.isArray(sent.emits)
      ? sent.emits
          .filter(isBag)
          .map((emit): EmitRecord => ({ event: (emit.event ?? null) as Json, meta: toEmitMeta(emit.meta) }))
      : [],
    dbWrites: isBag(sent.dbWrites) ? (sent.dbWrites as Record<string, Json>) : {},
    logs: Array.isArray(sent.logs) ? (sent.logs.filter(isLogRecord) as LogRecord[]) : [],
    durationMs: typeof sent.durationMs === "number" ? sent.durationMs : performance.now() - entry.startedAt,
  };
  if (isBag(sent.error)) result.error = errorRecord(sent.error);
  // The response already given to the caller, if any, is the run's response.
  const response = entry.response ?? (sent.response === undefined ? undefined : checkedResponse(sent.response));
  if (response) result.response = response;
  if (Array.isArray(sent.additionalProps)) {
    result.additionalProps = sent.additionalProps.filter(
      (prop) => isBag(prop) && typeof prop.name === "string" && typeof prop.type === "string",
    ) as InvocationResult["additionalProps"];
  }
  return result;
}

function isLogRecord(value: unknown): boolean {
  return (
    isBag(value) &&
    typeof value.ts === "number" &&
    typeof value.message === "string" &&
    LOG_LEVELS.has(String(value.level))
  );
}

function errorRecord(error: Bag): ErrorRecord {
  const record: ErrorRecord = {
    name: typeof error.name === "string" ? error.name : "Error",
    message: typeof error.message === "string" ? error.message : String(error.message),
    ts: typeof error.ts === "number" ? error.ts : Date.now(),
  };
  if (typeof error.stack === "string") record.stack = error.stack;
  return record;
}
