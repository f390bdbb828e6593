/**
 * The sandbox children of one source: up to `maxProcesses` healthy ones, started on demand and
 * reaped when idle, never shared with another source. An invocation goes to the least-loaded
 * healthy child; a child that is blocked (`SandboxOwnerProcess.blocked`) or draining gets nothing
 * new. Every child holds a slot of the host's {@link SandboxBudget}: a first child (one the run
 * needs) may make room by stopping another source's idle child, or waits for a slot; a second one
 * starts only below the bound.
 *
 * When a child stops or blocks because of one invocation, the others it had in flight come back
 * here and run once more on another child. A component's effects are applied only from its
 * result, so a second run applies nothing twice; calls the code made to the outside world before
 * its process stopped are made again. A run that has been retried once and is displaced again
 * fails with a SandboxError. An invocation that had not started where it was is moved without
 * counting as its retry.
 */
import type { InvokeHandlers } from "#core/ports/component-host";
import type { HttpResponseSpec, Invocation, InvocationResult } from "#runtime/protocol";
import type { BudgetWaiter } from "./sandbox-budget.ts";
import {
  type ChildTask,
  failureOf,
  SandboxOwnerProcess,
  type SandboxOwnerProcessOptions,
  type StopReason,
} from "./sandbox-owner-process.ts";

export interface SandboxOwnerPoolOptions
  extends Pick<
    SandboxOwnerProcessOptions,
    "entryPath" | "sourceDir" | "budget" | "heapMb" | "idleMs" | "blockedAfterMs" | "log"
  > {
  /** Healthy children at most; blocked ones waiting to be killed come on top (up to as many again). */
  readonly maxProcesses: number;
  /** Called when the pool has no child and no invocation left (it may be dropped). */
  onEmpty?(pool: SandboxOwnerPool): void;
}

/** Moves of one invocation between children (a retry, or a move before it started) at most. */
const MAX_MOVES = 4;

export class SandboxOwnerPool implements BudgetWaiter {
  private readonly children: SandboxOwnerProcess[] = [];
  /** Invocations waiting for a child: every child blocked, or their source blocks one. */
  private held: PoolTask[] = [];
  /** Invocations not finished yet, wherever they are (held, in a child, being moved). */
  private unfinished = 0;
  private closed = false;

  constructor(private readonly options: SandboxOwnerPoolOptions) {}

  /** Pids of the running children, oldest first. */
  get pids(): number[] {
    return this.children.flatMap((child) => (child.pid === undefined ? [] : [child.pid]));
  }

  /** Runs one invocation; never rejects. */
  invoke(bundlePath: string, invocation: Invocation, handlers?: InvokeHandlers): Promise<InvocationResult> {
    this.unfinished += 1;
    return new Promise<InvocationResult>((resolve) => {
      this.dispatch(
        new PoolTask(this, bundlePath, invocation, handlers, (result) => {
          this.unfinished -= 1;
          resolve(result);
          this.checkEmpty();
        }),
      );
    });
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
  dispatch(task: PoolTask): void {
    if (this.closed) {
      task.fail("SandboxError", "the component host was closed");
      return;
    }
    const child = this.blocksSource(task.invocation.sourceId) ? undefined : this.pick(task);
    if (child) child.invoke(task);
    else this.held.push(task);
  }

  /**
   * The least-loaded ready healthy child (the oldest among equals, so that spare children go idle
   * and are reaped), else a starting one. Another child is started when none is free and fewer
   * than `maxProcesses` are healthy, and the budget has room: a child the invocation needs (there
   * is no other) may stop an idle child of another source, or waits for a slot.
   */
  private pick(task: PoolTask): SandboxOwnerProcess | undefined {
    let best: SandboxOwnerProcess | undefined;
    let starting: SandboxOwnerProcess | undefined;
    let healthy = 0;
    for (const child of this.children) {
      if (child.blocked || child.draining) continue;
      healthy += 1;
      if (task.tried.has(child)) continue;
      if (child.ready) {
        if (!best || child.load < best.load) best = child;
      } else if (!starting || child.load < starting.load) {
        starting = child;
      }
    }
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
        idleMs: this.options.idleMs,
        blockedAfterMs: this.options.blockedAfterMs,
        ...(this.options.log ? { log: this.options.log } : {}),
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

  /** Whether a child is blocked by an invocation of `sourceId`: more of them would block more. */
  private blocksSource(sourceId: string): boolean {
    for (const child of this.children) if (child.blockingSourceId === sourceId) return true;
    return false;
  }

  /** Dispatches held invocations again after a child changed (ready, blocked, recovered, gone). */
  private pump(): void {
    if (this.held.length === 0) return;
    const held = this.held;
    this.held = [];
    for (const task of held) this.dispatch(task);
    // Served by a child of its own after all: a waiter left in the budget would drain another
    // source's process for nothing.
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

/** One invocation through the pool, across the children it runs on. */
class PoolTask implements ChildTask {
  readonly startedAt = performance.now();
  /** Children that gave this invocation back: it is not sent there again. */
  readonly tried = new Set<SandboxOwnerProcess>();
  private retried = false;
  private moves = 0;
  private response: HttpResponseSpec | undefined;
  private done = false;

  constructor(
    private readonly pool: SandboxOwnerPool,
    readonly bundlePath: string,
    readonly invocation: Invocation,
    private readonly handlers: InvokeHandlers | undefined,
    private readonly resolve: (result: InvocationResult) => void,
  ) {}

  /** The first response of any attempt is the run's response; later ones are dropped. */
  respond(response: HttpResponseSpec): void {
    if (this.done || this.response) return;
    this.response = response;
    this.handlers?.onRespond?.(response);
  }

  finish(result: InvocationResult): void {
    if (this.done) return;
    this.done = true;
    if (this.response) result.response = this.response;
    this.resolve(result);
  }

  fail(name: string, message: string): void {
    this.finish(failureOf(this, name, message));
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
