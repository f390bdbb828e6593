/**
 * The sandbox children of one source, or of one workflow: up to `maxProcesses` healthy ones,
 * started on demand and reaped when idle, never shared with another source or workflow (a
 * process holds its code's secret props; decision 82). An invocation goes to the least-loaded
 * healthy child; a child that is blocked (`SandboxOwnerProcess.blocked`) or draining gets nothing
 * new. Every child holds a slot of the host's {@link SandboxBudget}: a first child (one the run
 * needs) may make room by stopping another pool's idle child, or waits for a slot; a second one
 * starts only below the bound.
 *
 * When a child stops or blocks because of one invocation, the others it had in flight come back
 * here and run once more on another child. A component's effects are applied only from its
 * result, so a second run applies nothing twice; calls the code made to the outside world before
 * its process stopped are made again. A run that has been retried once and is displaced again
 * fails with a SandboxError. An invocation that had not started where it was is moved without
 * counting as its retry.
 *
 * A child keeps every module it has loaded (ES modules are never unloaded): each version of a
 * source's code, each step set of a workflow. So a child takes code it has not loaded yet only
 * while the bundles it was given stay within a share of its heap ({@link codeBudgetBytes});
 * past that it drains (ends its runs, then exits) and a fresh child loads the new code. A source
 * redeployed on every save (`sluice dev`) thus never runs its process out of memory.
 */
import { statSync } from "node:fs";
import type { InvokeHandlers } from "#core/ports/component-host";
import type { Logger } from "#core/ports/logger";
import type {
  DataStoreReply,
  ErrorRecord,
  HttpResponseSpec,
  Invocation,
  InvocationResult,
  WorkflowInvocation,
  WorkflowResult,
} from "#runtime/protocol";
import { malformedError, type Parsed, parseInvocationResult, parseWorkflowResult } from "#runtime/protocol-parsers";
import { failedResult } from "#runtime/run-invocation";
import { failedWorkflowResult } from "#runtime/run-workflow";
import type { InvokeRequest } from "#runtime/sandbox-channel";
import type { BudgetWaiter } from "./sandbox-budget.ts";
import {
  type ChildTask,
  SandboxOwnerProcess,
  type SandboxOwnerProcessOptions,
  type StopReason,
} from "./sandbox-owner-process.ts";

export interface SandboxOwnerPoolOptions
  extends Pick<
    SandboxOwnerProcessOptions,
    "entryPath" | "sourceDir" | "budget" | "heapMb" | "tmp" | "idleMs" | "blockedAfterMs"
  > {
  /** Where a malformed result or response of a child is reported. */
  readonly log?: Logger;
  /** Healthy children at most; blocked ones waiting to be killed come on top (up to as many again). */
  readonly maxProcesses: number;
  /** Called when the pool has no child and no invocation left (it may be dropped). */
  onEmpty?(pool: SandboxOwnerPool): void;
}

/** Moves of one invocation between children (a retry, or a move before it started) at most. */
const MAX_MOVES = 4;

const MIB = 1024 * 1024;
/**
 * A child's heap takes about 4.4 bytes per byte of bundle it loads (a registry source, 0.95 MB
 * of code with axios inlined: 4.0 MiB of heap; docs/components.md, "Memory"); bundles up to a
 * sixteenth of the heap cap thus take about a quarter of it, and leave the rest to the runs.
 */
const HEAP_PER_CODE_BUDGET = 16;

/** Bytes of bundles a child with a heap cap of `heapMb` MiB may be given (one bundle, whatever its size). */
export const codeBudgetBytes = (heapMb: number) => Math.floor((heapMb * MIB) / HEAP_PER_CODE_BUDGET);

/** The bundle files a run loads: a source's bundle, or a workflow's step modules. */
const bundlesOf = (request: InvokeRequest): readonly string[] =>
  "bundlePath" in request ? [request.bundlePath] : Object.values(request.stepBundles);

/** The bundles a child was given, and their bytes in all. */
interface GivenCode {
  readonly paths: Set<string>;
  bytes: number;
}

export class SandboxOwnerPool implements BudgetWaiter {
  private readonly children: SandboxOwnerProcess[] = [];
  /** Invocations waiting for a child: every child blocked, or their source blocks one. */
  private held: QueuedTask[] = [];
  /** Invocations not finished yet, wherever they are (held, in a child, being moved). */
  private unfinished = 0;
  private closed = false;
  /** The code each child was given. */
  private readonly given = new WeakMap<SandboxOwnerProcess, GivenCode>();
  /** The size of each bundle file, read once. */
  private readonly bundleBytes = new Map<string, number>();

  constructor(private readonly options: SandboxOwnerPoolOptions) {}

  /** Pids of the running children, oldest first. */
  get pids(): number[] {
    return this.children.flatMap((child) => (child.pid === undefined ? [] : [child.pid]));
  }

  /** Runs one invocation of a source (its component bundled at `bundlePath`); never rejects. */
  invoke(bundlePath: string, invocation: Invocation, handlers?: InvokeHandlers): Promise<InvocationResult> {
    return this.run(SOURCE_RUNS, { type: "invoke", bundlePath, invocation }, invocation.sourceId, handlers);
  }

  /**
   * Runs one run of a workflow; `stepBundles` gives each step module's bundle path by code hash
   * (the invocation's `steps[].module`). Never rejects.
   */
  invokeWorkflow(
    stepBundles: Record<string, string>,
    invocation: WorkflowInvocation,
    handlers?: InvokeHandlers,
  ): Promise<WorkflowResult> {
    return this.run(WORKFLOW_RUNS, { type: "invoke", stepBundles, invocation }, invocation.workflowId, handlers);
  }

  private run<R extends RunResult>(
    kind: RunKind<R>,
    request: InvokeRequest,
    ownerId: string,
    handlers: InvokeHandlers | undefined,
  ): Promise<R> {
    this.unfinished += 1;
    return new Promise<R>((resolve) => {
      const task = new PoolTask(this, kind, request, ownerId, handlers, (result) => {
        this.unfinished -= 1;
        resolve(result);
        this.checkEmpty();
      });
      this.dispatch(task);
    });
  }

  /** @internal Where tasks report a child's malformed answer. */
  get log(): Logger | undefined {
    return this.options.log;
  }

  /** Whether the pool has no child and no invocation to finish. */
  get empty(): boolean {
    return this.children.length === 0 && this.unfinished === 0;
  }

  /** The host's budget has a slot for this pool: held invocations try again. */
  granted(): void {
    this.pump();
  }

  /** Kills every child; in-flight and waiting invocations end with a SandboxError saying `why`. */
  async close(why: string): Promise<void> {
    this.closed = true;
    const held = this.held;
    this.held = [];
    for (const task of held) task.fail("SandboxError", why);
    await Promise.all([...this.children].map((child) => child.kill(why)));
  }

  /** @internal Sends `task` to a child, or holds it until one can take it. */
  dispatch(task: QueuedTask): void {
    if (this.closed) {
      task.fail("SandboxError", "the component host was closed");
      return;
    }
    const child = this.blocksOwner(task.ownerId) ? undefined : this.pick(task);
    if (child) {
      this.give(child, task);
      child.invoke(task);
    } else {
      this.held.push(task);
    }
  }

  /** The bytes of the bundles of `task` that `child` has not been given yet. */
  private newCodeBytes(child: SandboxOwnerProcess, task: QueuedTask): number {
    const given = this.given.get(child);
    let bytes = 0;
    for (const path of bundlesOf(task.request)) if (!given?.paths.has(path)) bytes += this.sizeOf(path);
    return bytes;
  }

  /** Whether `child` may load the code of `task` too (see the file header). */
  private fits(child: SandboxOwnerProcess, task: QueuedTask): boolean {
    const given = this.given.get(child);
    if (!given || given.bytes === 0) return true;
    const bytes = this.newCodeBytes(child, task);
    return bytes === 0 || given.bytes + bytes <= codeBudgetBytes(this.options.heapMb);
  }

  private give(child: SandboxOwnerProcess, task: QueuedTask): void {
    let given = this.given.get(child);
    if (!given) {
      given = { paths: new Set(), bytes: 0 };
      this.given.set(child, given);
    }
    for (const path of bundlesOf(task.request)) {
      if (given.paths.has(path)) continue;
      given.paths.add(path);
      given.bytes += this.sizeOf(path);
    }
  }

  private sizeOf(path: string): number {
    let bytes = this.bundleBytes.get(path);
    if (bytes === undefined) {
      try {
        bytes = statSync(path).size;
      } catch {
        bytes = 0; // Gone (the source was removed): the child fails to load it and says so.
      }
      this.bundleBytes.set(path, bytes);
    }
    return bytes;
  }

  /**
   * The least-loaded ready healthy child (the oldest among equals, so that spare children go idle
   * and are reaped), else a starting one. Another child is started when none is free and fewer
   * than `maxProcesses` are healthy, and the budget has room: a child the invocation needs (there
   * is no other) may stop an idle child of another pool, or waits for a slot.
   */
  private pick(task: QueuedTask): SandboxOwnerProcess | undefined {
    let best: SandboxOwnerProcess | undefined;
    let starting: SandboxOwnerProcess | undefined;
    let healthy = 0;
    const full: SandboxOwnerProcess[] = [];
    for (const child of this.children) {
      if (child.blocked || child.draining) continue;
      if (!this.fits(child, task)) {
        full.push(child);
        continue;
      }
      healthy += 1;
      if (task.tried.has(child)) continue;
      if (child.ready) {
        if (!best || child.load < best.load) best = child;
      } else if (!starting || child.load < starting.load) {
        starting = child;
      }
    }
    // Drained after the loop: a child without runs stops at once, and leaves `children`.
    for (const child of full) child.drain();
    // Beyond the maximum only for an invocation every healthy child gave back already.
    const room = healthy < this.options.maxProcesses || (!best && !starting);
    const wantsAnother = !best || (best.load > 0 && !starting);
    if (wantsAnother && room && this.children.length < 2 * this.options.maxProcesses) {
      const needed = !best && !starting;
      if (this.options.budget.take(needed)) {
        const started = this.start();
        if (started && needed) starting = started;
      } else if (needed) {
        this.options.budget.wait(this);
      }
    }
    return best ?? starting;
  }

  private start(): SandboxOwnerProcess | undefined {
    try {
      const child = new SandboxOwnerProcess({
        entryPath: this.options.entryPath,
        sourceDir: this.options.sourceDir,
        budget: this.options.budget,
        heapMb: this.options.heapMb,
        ...(this.options.tmp ? { tmp: this.options.tmp } : {}),
        idleMs: this.options.idleMs,
        blockedAfterMs: this.options.blockedAfterMs,
        onRetired: (retired) => {
          const index = this.children.indexOf(retired);
          if (index >= 0) this.children.splice(index, 1);
          this.pump();
          this.checkEmpty();
        },
        onChange: () => this.pump(),
      });
      this.children.push(child);
      return child;
    } catch {
      // fork failed (no memory, no pids): the invocation waits for another child or fails.
      return undefined;
    }
  }

  private checkEmpty(): void {
    if (this.empty) this.options.onEmpty?.(this);
  }

  /** Whether a child is blocked by an invocation of `ownerId`: more of them would block more. */
  private blocksOwner(ownerId: string): boolean {
    for (const child of this.children) if (child.blockingOwnerId === ownerId) return true;
    return false;
  }

  /** Dispatches held invocations again after a child changed (ready, blocked, recovered, gone). */
  private pump(): void {
    if (this.held.length === 0) return;
    const held = this.held;
    this.held = [];
    for (const task of held) this.dispatch(task);
    // Served by a child of its own after all: a waiter left in the budget would drain another
    // pool's process for nothing.
    if (this.held.length === 0) this.options.budget.unwait(this);
    // Nothing could take them, nothing is starting or running that could, and the budget did
    // not make them wait: no child can start.
    if (this.held.length > 0 && this.children.length === 0 && !this.options.budget.isWaiting(this)) {
      const stuck = this.held;
      this.held = [];
      for (const task of stuck) task.fail("SandboxError", "no sandbox process could be started");
    }
  }
}

/** A task as the pool queues and dispatches it, whatever its kind of run. */
interface QueuedTask extends ChildTask {
  /** Children that gave this invocation back: it is not sent there again. */
  readonly tried: Set<SandboxOwnerProcess>;
}

/** What the pool needs of a run's result, whatever its kind. */
interface RunResult {
  invocationId: string;
  response?: HttpResponseSpec;
}

/** How a kind of run reads a child's answer and fails. */
interface RunKind<R extends RunResult> {
  /** The field naming the owner in a log line. */
  readonly ownerField: "source_id" | "workflow_id";
  /**
   * Whether the child's `respond` messages give the run's response before its result (a
   * source's). A workflow's response comes only in its result, so a `respond` for it is ignored.
   */
  readonly respondsEarly: boolean;
  parse(raw: unknown, invocationId: string): Parsed<R>;
  failed(invocationId: string, error: ErrorRecord, durationMs: number): R;
}

const SOURCE_RUNS: RunKind<InvocationResult> = {
  ownerField: "source_id",
  respondsEarly: true,
  parse: parseInvocationResult,
  failed: failedResult,
};

const WORKFLOW_RUNS: RunKind<WorkflowResult> = {
  ownerField: "workflow_id",
  respondsEarly: false,
  parse: parseWorkflowResult,
  failed: failedWorkflowResult,
};

/** One invocation through the pool, across the children it runs on. */
class PoolTask<R extends RunResult> implements QueuedTask {
  readonly startedAt = performance.now();
  /** Children that gave this invocation back: it is not sent there again. */
  readonly tried = new Set<SandboxOwnerProcess>();
  readonly invocationId: string;
  readonly timeoutMs: number;
  private retried = false;
  private moves = 0;
  private response: HttpResponseSpec | undefined;
  private done = false;

  constructor(
    private readonly pool: SandboxOwnerPool,
    private readonly kind: RunKind<R>,
    readonly request: InvokeRequest,
    readonly ownerId: string,
    private readonly handlers: InvokeHandlers | undefined,
    private readonly resolve: (result: R) => void,
  ) {
    this.invocationId = request.invocation.invocationId;
    this.timeoutMs = request.invocation.timeoutMs;
  }

  /** The first response of any attempt is the run's response; later ones are dropped. */
  respond(response: HttpResponseSpec): void {
    if (this.done || this.response || !this.kind.respondsEarly) return;
    this.response = response;
    this.handlers?.onRespond?.(response);
  }

  /** Trusted code serves the call (`InvokeHandlers.dataStore`); a finished run serves none. */
  dataStore(call: unknown): Promise<DataStoreReply> {
    const serve = this.handlers?.dataStore;
    if (this.done || !serve) {
      const message = this.done ? "the run has ended" : "this run has no data stores";
      return Promise.resolve({ ok: false, error: { name: "DataStoreError", message } });
    }
    return serve(call);
  }

  /** The child's result, parsed as on every platform: malformed, the run fails with nothing of it applied. */
  answer(raw: unknown): void {
    const parsed = this.kind.parse(raw, this.invocationId);
    if (!parsed.ok) {
      this.refuse("result", parsed.problem);
      return;
    }
    // The response already given to the caller, if any, is the run's response (`finish`); one
    // that comes only with the result is handed over now, as the AWS host does.
    if (parsed.value.response) this.respond(parsed.value.response);
    this.finish(parsed.value);
  }

  refuse(message: "result" | "response", problem: string): void {
    this.pool.log?.warn(`a sandbox child sent a malformed ${message}`, {
      [this.kind.ownerField]: this.ownerId,
      problem,
    });
    this.finishWith(malformedError(message, problem, Date.now()));
  }

  fail(name: string, message: string): void {
    this.finishWith({ name, message, ts: Date.now() });
  }

  /** The run fails with `error`, timed from when the pool got it. */
  private finishWith(error: ErrorRecord): void {
    this.finish(this.kind.failed(this.invocationId, error, performance.now() - this.startedAt));
  }

  private finish(result: R): void {
    if (this.done) return;
    this.done = true;
    if (this.response) result.response = this.response;
    this.resolve(result);
  }

  displace(from: SandboxOwnerProcess, why: StopReason, started: boolean): void {
    if (this.done) return;
    this.tried.add(from);
    this.moves += 1;
    if (started && this.retried) {
      this.fail(why.name, `${why.message}; it had been run again once already`);
      return;
    }
    if (this.moves > MAX_MOVES) {
      this.fail(why.name, `${why.message}; it was moved ${MAX_MOVES} times already`);
      return;
    }
    if (started) this.retried = true;
    this.pool.dispatch(this);
  }
}
