/**
 * One long-lived sandbox child of a source or a workflow, running many invocations (runs of the
 * source, or runs of the workflow) at a time for its pool (`sandbox-owner-pool.ts`). It turns whatever happens to the child (an answer, a timeout, a crash,
 * a blocked event loop, a broken protocol) into exactly one outcome per invocation: a result, or
 * "run it elsewhere".
 *
 * Which invocation stopped the child: the one whose time limit ran out; the one whose code said it
 * ends the process (`exiting`); otherwise (out of memory, a native crash, a blocked loop) the one
 * whose code the child started last (`started`), which is exact when the code blocks or allocates
 * right as it runs and a guess when it does so after an `await` while other runs started. That
 * invocation gets the error; the others in flight are given back to the pool to run again.
 * A child that breaks the protocol (a malformed, oversized or unfinished message, a result before
 * its `started`) is killed at once, and that counts as its crash.
 *
 * Invocations go to the child in batches, one write per turn of the event loop; the child answers
 * what it has at the end of each tick as one write, and writes its `started` before the code runs
 * (`sandbox-entry.ts`): a source's at once, with what it had queued; the workflow runs of one
 * batch together, before the first of their step code runs (decision 486). Either way, runs that
 * started before any of their code ran leave the host a guess when one of them blocks.
 */
import { readFileSync } from "node:fs";
import { DATA_STORE_CALLS_PER_RUN, type DataStoreReply, type HttpResponseSpec } from "#runtime/protocol";
import { parseHttpResponse } from "#runtime/protocol-parsers";
import { type InvokeRequest, SANDBOX_HEARTBEAT_MS, type SandboxMessage } from "#runtime/sandbox-channel";
import type { BudgetMember, SandboxBudget } from "./sandbox-budget.ts";
import { crashReason, forkSandbox, isOutOfMemory, isRunning, type SandboxProcess } from "./sandbox-process.ts";
import { MAX_TMP_ENTRIES, newTmpFolder, removeTmpFolder, type SandboxTmpSettings, tmpUsage } from "./sandbox-tmp.ts";

/**
 * Time an invocation gets beyond its own `timeoutMs` before its process is killed. The runtime
 * answers a TimeoutError by itself unless the code blocks the event loop; starting the child
 * counts against the invocation too.
 */
const KILL_GRACE_MS = 1000;
/** How often the host looks for a blocked child. */
const CHECK_MS = 2 * SANDBOX_HEARTBEAT_MS;
/**
 * Default of `blockedAfterMs`: a child silent this long counts as blocked. It is counted in checks
 * (of CHECK_MS) rather than time: when this process itself was busy, the child's beats wait unread
 * in the pipe, and the poll phase between two checks reads them.
 */
export const DEFAULT_BLOCKED_AFTER_MS = 300;
/** A blocked child running no invocation of ours (code left behind by a finished one) is killed after this many. */
const STRAY_AFTER_CHECKS = 30;
/**
 * An idle child beats only once a second (`SANDBOX_IDLE_HEARTBEAT_MS`): silent for this many
 * checks, code left behind holds it, and it is killed. It is never taken for blocked while idle,
 * so new work still goes to it (and moves if it does not start).
 */
const IDLE_SILENT_CHECKS = 50;
/**
 * CPU an idle child may use (no run in flight) before it is killed: code a finished run left
 * behind that loops while yielding is never silent, so the silence rule misses it. The runtime
 * and a library's timers use milliseconds.
 */
export const IDLE_CPU_MAX_MS = 2_000;
/** How often (in checks) an idle child's CPU is read: every 2 s. */
const IDLE_CPU_EVERY_CHECKS = 20;
/**
 * How often (in checks) a child's `/tmp` is measured: every second, busy or idle (code a finished
 * run left behind can still write). An empty folder costs one `opendir`.
 */
const TMP_EVERY_CHECKS = 10;
/**
 * A message left unfinished for this many checks with nothing else heard is a violation. The
 * runtime writes each message whole and at once; the host reads between any two checks.
 */
const UNFINISHED_AFTER_CHECKS = 30;

/**
 * Messages in one second that concern no invocation in flight here (beats, and a result,
 * `started`, `exiting`, response or data store call naming none) or repeat one (a second
 * `started`, which the runtime sends only around a module's first load, `exiting` or response)
 * beyond which a child is killed.
 * The runtime beats at most every `SANDBOX_HEARTBEAT_MS / 2` and answers at most the runs it was
 * given, some late (moved away meanwhile); code writing such lines in a loop would otherwise keep
 * the server's one thread parsing them (a core's worth, measured) for as long as the child lives.
 */
export const MAX_IDLE_MESSAGES_PER_SECOND = 1000;

/** Why an invocation gets no result from this process. */
export interface StopReason {
  readonly name: string;
  readonly message: string;
}

/**
 * One invocation as the pool hands it to a process, perhaps a second time to another one: a
 * source's invocation or a workflow's run. The process does not look inside: what the child
 * answers goes to the task, which parses it as its kind says.
 */
export interface ChildTask {
  readonly invocationId: string;
  /** The invocation's own time limit; the process kills the child a little after it. */
  readonly timeoutMs: number;
  /** The source or workflow whose code runs (messages and logs name it). */
  readonly ownerId: string;
  /** What the child is sent. */
  readonly request: InvokeRequest;
  /** The child's `respond`, normalised. */
  respond(response: HttpResponseSpec): void;
  /**
   * A data store call of the invocation's code, as the child sent it (untrusted: trusted code
   * checks it). Resolves with the reply to send back; never rejects.
   */
  dataStore(call: unknown): Promise<DataStoreReply>;
  /** The child's result for the invocation, as it sent it (untrusted: the task parses it). */
  answer(raw: unknown): void;
  /** The child sent a malformed `respond`: the invocation fails, nothing of it applied. */
  refuse(message: "response", problem: string): void;
  /** The invocation ends with the error `name: message` (a timeout, a crash, ...). */
  fail(name: string, message: string): void;
  /**
   * This process gave the invocation back without a result: it stopped, or is blocked, because
   * of another invocation. `started` says whether the invocation's code had begun running here.
   */
  displace(from: SandboxOwnerProcess, why: StopReason, started: boolean): void;
}

export interface SandboxOwnerProcessOptions {
  readonly entryPath: string;
  /** The source's bundle folder, the only one the child may read besides the entry's. */
  readonly sourceDir: string;
  /** The host's bound on live processes: this one holds a slot of it while it lives. */
  readonly budget: SandboxBudget;
  readonly heapMb: number;
  /** The child's `/tmp`: where its folder is made, and what it may hold; absent: it writes nothing. */
  readonly tmp?: SandboxTmpSettings;
  /** Killed after this long without an invocation in flight. */
  readonly idleMs: number;
  /** Silence after which the child counts as blocked (rounded up to whole checks). */
  readonly blockedAfterMs: number;
  /** Called once, when the process stops taking invocations (killed, reaped or exited). */
  onRetired(process: SandboxOwnerProcess): void;
  /** Called when the process becomes ready, blocked, healthy again, or starts draining. */
  onChange(process: SandboxOwnerProcess): void;
}

interface Pending {
  readonly task: ChildTask;
  readonly sentAt: number;
  timer?: NodeJS.Timeout;
  /** The response passed on, normalised; the result carries the same. */
  response?: HttpResponseSpec;
  /** When the child said it began running this invocation's code (a counter; 0: not yet). */
  startOrder: number;
  /** Written to the child (not only queued for the end of the tick). */
  sent: boolean;
  /** Data store calls the child made for it. */
  dataStoreCalls: number;
}

export class SandboxOwnerProcess implements BudgetMember {
  private readonly sandbox: SandboxProcess;
  private readonly pending = new Map<string, Pending>();
  private readonly exited: Promise<void>;
  private readonly watchdog: NodeJS.Timeout;
  private isReady = false;
  private retired = false;
  private isBlocked = false;
  private isDraining = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private heard = false;
  private silentChecks = 0;
  /**
   * The child's CPU time (ms) at the first check after it last became idle; undefined while busy,
   * before that check, or where unknown. Read at a check, not as the last run leaves: under load a
   * child goes idle and busy again many times between two checks, and each read of `/proc` is a
   * synchronous file read on the server's event loop (3% of its CPU in the workflow bench).
   */
  private idleCpuFromMs: number | undefined;
  /** Idle since the last check: the next one reads `idleCpuFromMs`. */
  private idleCpuUnread = false;
  private idleCpuChecks = 0;
  private unfinishedChecks = 0;
  /** Why the child was killed for breaking the protocol. */
  private violation: string | undefined;
  private usedAt = performance.now();
  private starts = 0;
  /** The invocation whose code said it ends the process. */
  private exiting: string | undefined;
  /** Messages concerning no invocation here in the current second (see {@link noteIdleMessage}). */
  private idleMessages = 0;
  private idleWindowStart = 0;
  /** Invocations to send at the end of this tick, as one message. */
  private outbox: Pending[] = [];
  /** Step bundle paths this child was given, by code hash (see `withUnsentStepBundles`). */
  private readonly stepBundlesSent = new Map<string, string>();
  /** The child's `/tmp` folder, while it has one. */
  private readonly tmpFolder: string | undefined;
  private tmpChecks = 0;
  /** Whether a measure of its `/tmp` is on. */
  private measuringTmp = false;

  constructor(private readonly options: SandboxOwnerProcessOptions) {
    const { tmp } = options;
    this.tmpFolder = tmp ? newTmpFolder(tmp.root) : undefined;
    this.sandbox = forkSandbox(
      options.entryPath,
      options.sourceDir,
      options.heapMb,
      {
        onMessage: (message) => this.onMessage(message),
        onViolation: (why) => this.onViolation(why),
      },
      tmp && this.tmpFolder ? { folder: this.tmpFolder, maxFileBytes: tmp.maxBytes } : undefined,
    );
    const { child } = this.sandbox;
    options.budget.join(this);
    const folder = this.tmpFolder;
    this.exited = new Promise((resolve) =>
      child.once("exit", () => {
        // Its files go with it, as a Lambda environment's /tmp does; the exit waits for them.
        if (folder === undefined) resolve();
        else void removeTmpFolder(folder).then(() => resolve());
      }),
    );
    // A child that never started exits without an `exit` of its own only if spawning failed.
    if (folder !== undefined) child.once("error", () => void removeTmpFolder(folder));
    child.once("exit", () => this.retire());
    // After `exit`, once stderr and the channel are drained: the crash report and `exiting` are in.
    child.once("close", (code, signal) => this.onClose(code, signal));
    child.on("error", (error) => this.onError(error));
    this.watchdog = setInterval(() => this.check(), CHECK_MS);
    this.watchdog.unref();
  }

  get pid(): number | undefined {
    return this.sandbox.child.pid;
  }

  /** Whether the child has started and said so. */
  get ready(): boolean {
    return this.isReady;
  }

  /** Whether the child has not been heard from for a few hundred ms (its event loop is blocked). */
  get blocked(): boolean {
    return this.isBlocked;
  }

  /** Invocations in flight. */
  get load(): number {
    return this.pending.size;
  }

  /** Whether it takes no new work: its slot goes to another source once its runs have ended. */
  get draining(): boolean {
    return this.isDraining;
  }

  get lastUsedAt(): number {
    return this.usedAt;
  }

  reap(): void {
    void this.kill("the sandbox process was stopped to make room for another source's or workflow's");
  }

  drain(): void {
    if (this.isDraining || this.retired) return;
    this.isDraining = true;
    if (this.pending.size === 0) this.reap();
    else this.options.onChange(this);
  }

  /** The source or workflow whose invocation blocks this process, while it is blocked. */
  get blockingOwnerId(): string | undefined {
    if (!this.isBlocked) return undefined;
    return this.suspect()?.task.ownerId;
  }

  /** Runs one invocation; its outcome goes to the task's callbacks. */
  invoke(task: ChildTask): void {
    const { invocationId } = task;
    if (this.retired || this.pending.has(invocationId)) {
      task.fail(
        "SandboxError",
        this.retired ? "the sandbox process has stopped" : "an invocation with this id is running",
      );
      return;
    }
    this.usedAt = performance.now();
    if (this.pending.size === 0) {
      // Busy again: the reverse of what `remove` did when the last invocation left. The child
      // beats often again from now on: its silence is counted afresh.
      if (!this.isBlocked) this.silentChecks = 0;
      clearTimeout(this.idleTimer);
      this.idleCpuFromMs = undefined;
      this.idleCpuUnread = false;
      this.setRef(true);
      this.options.budget.setIdle(this, false);
    }
    const entry: Pending = { task, sentAt: performance.now(), startOrder: 0, sent: false, dataStoreCalls: 0 };
    this.pending.set(invocationId, entry);
    entry.timer = setTimeout(() => this.timeOut(invocationId), task.timeoutMs + KILL_GRACE_MS);
    if (this.isReady) this.send(entry);
  }

  /** Kills the process; in-flight invocations end with a SandboxError saying `why`. */
  kill(why: string): Promise<void> {
    this.retire();
    for (const entry of [...this.pending.values()]) this.fail(entry, "SandboxError", why);
    return this.terminate();
  }

  private terminate(): Promise<void> {
    const { child } = this.sandbox;
    if (child.pid === undefined || !isRunning(child)) return Promise.resolve();
    child.kill("SIGKILL");
    return this.exited;
  }

  /**
   * Queues `entry` until the end of this turn of the event loop (`setImmediate`): what a turn sends
   * to the child goes as one write here and one read there. A write costs about as much whatever
   * its size, so this is most of the host's cost per invocation under load.
   */
  private send(entry: Pending): void {
    this.outbox.push(entry);
    if (this.outbox.length === 1) setImmediate(() => this.flush());
  }

  private flush(): void {
    const requests: InvokeRequest[] = [];
    for (const entry of this.outbox) {
      // Settled or moved meanwhile (the process stopped or blocked): not sent.
      if (this.pending.get(entry.task.invocationId) !== entry) continue;
      entry.sent = true;
      requests.push(withUnsentStepBundles(entry.task.request, this.stepBundlesSent));
    }
    this.outbox = [];
    // A write error means the child is gone or going: its `close` settles what is in flight.
    if (!this.retired) this.sandbox.send(requests);
  }

  private onMessage(message: SandboxMessage): void {
    // A child that broke the protocol is being killed: nothing it sent after that counts, not
    // even a result that came in the same read (its `close` settles what was in flight).
    if (this.violation !== undefined) return;
    this.heard = true;
    switch (message.type) {
      case "result": {
        const entry = this.entryOf(message.result.invocationId);
        if (!entry) {
          this.noteIdleMessage();
          break;
        }
        // The runtime says `started` before every result; a result without it is forged, and
        // would end a run whose code did not run.
        if (entry.startOrder === 0) this.onViolation("it sent a result for an invocation it had not started");
        // Parsed by the task as on every platform (`protocol-parsers.ts`): the runtime in the child
        // builds it correctly, but the code running beside it can send a result of its own.
        else if (this.remove(entry)) entry.task.answer(message.result);
        break;
      }
      case "respond":
        this.forwardRespond(message.invocationId, message.response);
        break;
      case "data_store":
        this.forwardDataStoreCall(message.invocationId, message.callId, message.call);
        break;
      case "started": {
        const entry = this.entryOf(message.invocationId);
        // The runtime says it again as a first load or the code begins (the last to say it is the
        // suspect of a block), rarely: a repeat also counts as chatter, since code can learn its
        // own run's id and repeat it without end.
        if (!entry || entry.startOrder > 0) this.noteIdleMessage();
        if (entry) entry.startOrder = ++this.starts;
        break;
      }
      case "exiting": {
        // The latest says whose exit it is (a signal the code handled leaves the process up).
        const entry = this.entryOf(message.invocationId);
        if (!entry || this.exiting === message.invocationId) this.noteIdleMessage();
        if (entry) this.exiting = message.invocationId;
        break;
      }
      case "beat":
        this.noteIdleMessage();
        break;
      case "ready":
        // The runtime says it once, when it starts; a repeat is forged, and would have every run
        // in flight sent (and run) again.
        if (this.isReady) {
          this.onViolation("it said it was ready twice");
          break;
        }
        this.isReady = true;
        for (const entry of this.pending.values()) if (!entry.sent) this.send(entry);
        this.options.onChange(this);
        break;
      case "described":
        // Only a process that describes code answers with a description (sandbox-process.ts).
        this.onViolation("it sent a description, which it was never asked for");
        break;
      default:
        break;
    }
    // A child that speaks is not blocked now: it takes work again at once rather than at the next
    // check, so the run that follows a long synchronous one does not start a cold child.
    if (this.isBlocked && !this.retired && this.violation === undefined) {
      this.isBlocked = false;
      this.silentChecks = 0;
      this.options.onChange(this);
    }
  }

  /**
   * Counts a message that concerns no invocation in flight here, or repeats one; past
   * {@link MAX_IDLE_MESSAGES_PER_SECOND} in a second it is a violation. False once it is.
   */
  private noteIdleMessage(): boolean {
    const now = performance.now();
    if (now - this.idleWindowStart >= 1000) {
      this.idleWindowStart = now;
      this.idleMessages = 0;
    }
    if (++this.idleMessages <= MAX_IDLE_MESSAGES_PER_SECOND) return true;
    this.onViolation(
      `it sent over ${MAX_IDLE_MESSAGES_PER_SECOND} messages in a second that concern no run of its own or repeat one`,
    );
    return false;
  }

  /** The in-flight invocation `invocationId` names, if it was sent here (code cannot know others). */
  private entryOf(invocationId: unknown): Pending | undefined {
    const entry = typeof invocationId === "string" ? this.pending.get(invocationId) : undefined;
    return entry?.sent ? entry : undefined;
  }

  /**
   * The child broke the protocol: it is killed, and its `close` settles what was in flight as a
   * crash, naming `why`.
   */
  private onViolation(why: string): void {
    if (this.violation !== undefined) return;
    this.violation = why;
    this.retire();
    void this.terminate();
  }

  private forwardRespond(invocationId: unknown, response: unknown): void {
    const entry = this.entryOf(invocationId);
    if (!entry || entry.response) {
      this.noteIdleMessage();
      return;
    }
    if (entry.startOrder === 0) {
      this.onViolation("it sent a response for an invocation it had not started");
      return;
    }
    const parsed = parseHttpResponse(response);
    if (!parsed.ok) {
      if (this.remove(entry)) entry.task.refuse("response", parsed.problem);
      return;
    }
    entry.response = parsed.value;
    entry.task.respond(parsed.value);
  }

  /**
   * Passes a data store call to its invocation's task and sends the reply back. Every call gets a
   * reply, so the code awaiting it never hangs: a call of an invocation that is not running here
   * (finished, moved, or never sent: the id is the child's word) is refused.
   */
  private forwardDataStoreCall(invocationId: string, callId: number, call: unknown): void {
    const entry = this.entryOf(invocationId);
    if (entry && entry.startOrder === 0) {
      this.onViolation("it sent a data store call for an invocation it had not started");
      return;
    }
    // Past the calls one run may make, each is refused at once: code that keeps making them is
    // chatter (the reply costs the server as much as the call), and the process is killed for it.
    const refusedAnyway = !entry || ++entry.dataStoreCalls > DATA_STORE_CALLS_PER_RUN;
    if (refusedAnyway && !this.noteIdleMessage()) return;
    const reply: Promise<DataStoreReply> = entry
      ? entry.task.dataStore(call)
      : Promise.resolve({
          ok: false,
          error: { name: "DataStoreError", message: "the run this data store call belongs to is not running" },
        });
    void reply.then((answer) => {
      if (!this.retired) this.sandbox.send([{ type: "data_store_reply", invocationId, callId, reply: answer }]);
    });
  }

  /** The in-flight invocation whose code the child started last. */
  private suspect(): Pending | undefined {
    let suspect: Pending | undefined;
    for (const entry of this.pending.values()) {
      if (entry.startOrder > (suspect?.startOrder ?? 0)) suspect = entry;
    }
    return suspect;
  }

  /** Runs every CHECK_MS: a busy child silent for `blockedAfterMs` (in whole checks) is blocked. */
  private check(): void {
    if (this.retired) return;
    this.checkTmp();
    if (this.idleCpuUnread) {
      this.idleCpuUnread = false;
      this.idleCpuFromMs = processCpuMs(this.sandbox.child.pid);
      this.idleCpuChecks = 0;
    } else if (this.idleCpuFromMs !== undefined && ++this.idleCpuChecks % IDLE_CPU_EVERY_CHECKS === 0) {
      const used = (processCpuMs(this.sandbox.child.pid) ?? this.idleCpuFromMs) - this.idleCpuFromMs;
      if (used > IDLE_CPU_MAX_MS) {
        void this.kill(`its code used ${Math.round(used)} ms of CPU after its runs had ended`);
        return;
      }
    }
    if (this.heard || this.sandbox.unfinishedChars() === 0) this.unfinishedChecks = 0;
    else if (++this.unfinishedChecks >= UNFINISHED_AFTER_CHECKS) {
      this.onViolation("it left a message unfinished");
      return;
    }
    if (!this.isReady) return;
    if (this.heard) {
      this.heard = false;
      this.silentChecks = 0;
      if (this.isBlocked) {
        this.isBlocked = false;
        this.options.onChange(this);
      }
      return;
    }
    this.silentChecks += 1;
    if (this.pending.size === 0 && !this.isBlocked) {
      if (this.silentChecks >= IDLE_SILENT_CHECKS) void this.kill("the sandbox process stayed blocked");
      return;
    }
    if (this.silentChecks === Math.max(1, Math.ceil(this.options.blockedAfterMs / CHECK_MS))) this.onBlocked();
    else if (this.silentChecks >= STRAY_AFTER_CHECKS && this.pending.size === 0)
      void this.kill("the sandbox process stayed blocked");
  }

  /**
   * Measures the child's `/tmp` every {@link TMP_EVERY_CHECKS}; over its bound, or made so that it
   * cannot be measured, the child is killed (its runs in flight fail: which of them wrote what
   * cannot be told) and its folder goes.
   */
  private checkTmp(): void {
    const { tmp } = this.options;
    if (tmp === undefined || this.tmpFolder === undefined || this.measuringTmp) return;
    if (++this.tmpChecks < TMP_EVERY_CHECKS) return;
    this.tmpChecks = 0;
    this.measuringTmp = true;
    void tmpUsage(this.tmpFolder, tmp.maxBytes, MAX_TMP_ENTRIES, this.pid).then((usage) => {
      this.measuringTmp = false;
      if (!usage.over || this.retired) return;
      const stopped = "the sandbox process was stopped and its /tmp emptied";
      const bound = `${Math.round(tmp.maxBytes / 1024 / 1024)} MiB`;
      void this.kill(
        usage.unmeasurable !== undefined
          ? `its /tmp could not be measured (${usage.unmeasurable}: a folder made unreadable, or a path too long); ${stopped}`
          : usage.bytes > tmp.maxBytes
            ? `its /tmp held over ${bound}; ${stopped}`
            : `its /tmp held over ${MAX_TMP_ENTRIES} files and folders; ${stopped}`,
      );
    });
  }

  /**
   * The child's event loop is blocked: new work goes elsewhere, and so does the work in flight
   * here, except the invocation likely blocking it, which stays until it answers or its time runs
   * out. Invocations that have not started are cancelled here and do not count as a retry.
   */
  private onBlocked(): void {
    this.isBlocked = true;
    // Without a suspect, nothing in flight here runs: code left behind by a finished invocation
    // loops, or this machine is too busy to run the child. Everything moves; the child stays, and
    // is killed if it does not come back (STRAY_AFTER_CHECKS).
    const suspect = this.suspect();
    const message = suspect
      ? `its sandbox process was blocked by another invocation (of ${suspect.task.ownerId})`
      : "its sandbox process was blocked";
    for (const entry of [...this.pending.values()]) {
      if (entry === suspect) continue;
      if (entry.startOrder === 0 && entry.sent) {
        this.sandbox.send([{ type: "cancel", invocationId: entry.task.invocationId }]);
      }
      this.displace(entry, { name: "SandboxError", message });
    }
    this.options.onChange(this);
  }

  private timeOut(invocationId: string): void {
    const entry = this.pending.get(invocationId);
    if (!entry) return;
    this.retire();
    this.fail(
      entry,
      "TimeoutError",
      `the invocation timed out after ${entry.task.timeoutMs / 1000}s; its process was killed`,
    );
    this.displaceAll(undefined, {
      name: "SandboxError",
      message: "its sandbox process was stopped because another invocation in it timed out",
    });
    void this.terminate();
  }

  private onClose(code: number | null, signal: NodeJS.Signals | null): void {
    this.retire();
    if (this.pending.size === 0) return;
    const stderr = this.sandbox.stderrTail();
    const name = this.violation === undefined && isOutOfMemory(stderr) ? "OutOfMemoryError" : "SandboxCrashError";
    const reason =
      this.violation === undefined
        ? crashReason(code, signal, stderr)
        : `it broke the protocol with the host (${this.violation}) and was killed`;
    const culprit = (this.exiting === undefined ? undefined : this.pending.get(this.exiting)) ?? this.suspect();
    if (culprit) this.fail(culprit, name, `the sandbox process stopped: ${reason}`);
    this.displaceAll(culprit, {
      name: "SandboxError",
      message: `its sandbox process stopped because of another invocation: ${reason}`,
    });
  }

  private onError(error: Error): void {
    void this.kill(`the sandbox process failed: ${error.message}`);
  }

  private displaceAll(except: Pending | undefined, why: StopReason): void {
    for (const entry of [...this.pending.values()]) if (entry !== except) this.displace(entry, why);
  }

  private displace(entry: Pending, why: StopReason): void {
    if (!this.remove(entry)) return;
    entry.task.displace(this, why, entry.startOrder > 0);
  }

  private fail(entry: Pending, name: string, message: string): void {
    if (this.remove(entry)) entry.task.fail(name, message);
  }

  /** Takes `entry` out of the in-flight set; false when it was out already. */
  private remove(entry: Pending): boolean {
    const { invocationId } = entry.task;
    if (this.pending.get(invocationId) !== entry) return false;
    this.pending.delete(invocationId);
    clearTimeout(entry.timer);
    if (this.exiting === invocationId) this.exiting = undefined;
    if (this.pending.size === 0 && !this.retired) {
      if (this.isDraining) {
        this.reap();
        return true;
      }
      this.idleTimer = setTimeout(() => void this.kill("the sandbox process was idle"), this.options.idleMs);
      this.idleTimer.unref();
      this.idleCpuUnread = true;
      this.setRef(false);
      this.options.budget.setIdle(this, true);
    }
    return true;
  }

  private retire(): void {
    if (this.retired) return;
    this.retired = true;
    clearTimeout(this.idleTimer);
    clearInterval(this.watchdog);
    this.options.budget.leave(this);
    this.options.onRetired(this);
  }

  /** An idle child must not keep this process alive; a busy one must, until its answer. */
  private setRef(on: boolean): void {
    for (const handle of this.sandbox.handles) {
      if (on) handle.ref?.();
      else handle.unref?.();
    }
  }
}

/**
 * The request as a child is sent it: a workflow run's step bundle paths only where the child was
 * not given that path for that hash before (`sent`, updated here; the child keeps every path it was
 * given: sandbox-channel.ts), so a run's line does not carry the same paths every time.
 */
export function withUnsentStepBundles(request: InvokeRequest, sent: Map<string, string>): InvokeRequest {
  if (!("stepBundles" in request)) return request;
  let fresh: Record<string, string> | undefined;
  for (const [module, path] of Object.entries(request.stepBundles)) {
    if (sent.get(module) === path) continue;
    sent.set(module, path);
    fresh ??= {};
    fresh[module] = path;
  }
  return { ...request, stepBundles: fresh ?? {} };
}

/** Clock ticks per second of `/proc/<pid>/stat`'s times (USER_HZ: 100 on Linux). */
const CLOCK_TICKS_PER_SECOND = 100;

/** The CPU time (user and system, ms) process `pid` has used, from `/proc`; undefined where unknown. */
export function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces: fields count from after it.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return Number.isFinite(ticks) ? (ticks * 1000) / CLOCK_TICKS_PER_SECOND : undefined;
}
