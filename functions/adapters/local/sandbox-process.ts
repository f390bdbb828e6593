/**
 * Starting a sandbox child and talking to it, and asking a fresh one to describe a bundle
 * (`describeInSandbox`). A child runs under Node's permission model (DESIGN.md decision 3) with
 * read access to the runtime entry's folder and one bundle folder only, and writes only to a
 * folder of its own that its code names `/tmp` (none for a describe; no child processes, no
 * workers, no addons), an empty environment, a heap cap, and on Linux a cap on all
 * its memory ({@link memoryCapMb}).
 *
 * Everything a child sends is untrusted: component code runs there and can write anything to any
 * of its descriptors. Messages come as lines of JSON on a pipe of our own (`sandbox-channel.ts`),
 * read with a frame limit and a guarded parse; a line that is too long or not a well-formed
 * message, or anything written to the request pipe, is a protocol violation, reported to the
 * owner of the process, which kills it.
 *
 * Not covered: Node 20's permission model has no network restriction, so component code can open
 * TCP sockets (Unix sockets are refused by the runtime, decision 488).
 *
 * Also bundled into the describer Lambda (`functions/internal/describer.ts`): import nothing here
 * that only local mode has.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fstatSync, readdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import type { Readable, Writable } from "node:stream";
import { parseDescribeReply } from "#runtime/protocol-parsers";
import {
  type DescribeReply,
  type DescribeRequest,
  LineDecoder,
  MAX_MESSAGE_BYTES,
  MESSAGE_FD,
  pathRedactor,
  REQUEST_FD,
  type SandboxChildConfig,
  type SandboxMessage,
  type SandboxRequest,
} from "#runtime/sandbox-channel";

/** Bytes of the child's stderr kept to explain a crash (an OOM report is a few hundred). */
const STDERR_TAIL = 4096;

/** Node 22.13 renamed the flag; older Node (20 here) only knows the experimental one. */
const PERMISSION_FLAG = process.allowedNodeEnvironmentFlags.has("--permission")
  ? "--permission"
  : "--experimental-permission";

/** How the owner of a child hears from it. */
export interface SandboxListener {
  /** A well-formed message (its fields are still the child's word: check them before use). */
  onMessage(message: SandboxMessage): void;
  /** The child broke the protocol (`why`, in words); nothing more is read from it. */
  onViolation(why: string): void;
}

type Refable = { ref?(): void; unref?(): void };

export interface SandboxProcess {
  readonly child: ChildProcess;
  /** The last few KiB the child wrote to stderr, without the server's paths. */
  stderrTail(): string;
  /** Writes `requests` to the child, as one write. */
  send(requests: readonly SandboxRequest[]): void;
  /** Characters received of a message not finished yet. */
  unfinishedChars(): number;
  /** Takes the server's paths out of a text (see `pathRedactor`). */
  redact(text: string): string;
  /** The handles that keep this process alive while the child runs. */
  readonly handles: readonly Refable[];
}

/**
 * Bytes of requests a child may leave unread before it is killed: far above what the runs in flight
 * to one child carry (each event is at most 512 KiB), far below what would strain the server.
 */
export const MAX_UNREAD_REQUEST_BYTES = 256 * 1024 * 1024;

/** A batch of requests is written in pieces of about this many characters (one string per piece). */
const WRITE_CHUNK_CHARS = 1024 * 1024;

/** What a sandbox process may use beyond its heap cap: Node itself, its threads' stacks, buffers. */
export const MEMORY_BEYOND_HEAP_MB = 384;

/**
 * The cap on a sandbox process's memory: its heap cap and {@link MEMORY_BEYOND_HEAP_MB}. The heap
 * cap (`--max-old-space-size`) leaves out buffers and array buffers, which code can allocate by
 * the gigabyte; the cap is the process's RLIMIT_DATA (its private writable memory, which Linux
 * counts since 4.7), set by the shell it starts through. An allocation past it fails as
 * `RangeError: Array buffer allocation failed`, or ends the process as out of memory.
 */
export const memoryCapMb = (heapMb: number) => heapMb + MEMORY_BEYOND_HEAP_MB;

/**
 * Open files (sockets included) of one sandbox process: far more than a component's requests need,
 * and few enough that its code cannot take the server's descriptors by connecting to it (the server
 * caps its connections too: `functions/local-mode/connection-cap.ts`).
 */
export const SANDBOX_OPEN_FILES = 1024;

/**
 * The command that runs `node` with `args` under {@link memoryCapMb}, without core dumps, and with
 * files of at most `maxFileBytes` when given (not on Windows, which has no `ulimit`).
 */
function cappedCommand(args: string[], heapMb: number, maxFileBytes?: number): [string, string[]] {
  if (process.platform === "win32") return [process.execPath, args];
  const kib = memoryCapMb(heapMb) * 1024;
  // In blocks of 512 bytes (POSIX sh). A write past it fails with EFBIG: Node ignores SIGXFSZ.
  const files =
    maxFileBytes === undefined ? "" : ` ulimit -f ${Math.max(1, Math.floor(maxFileBytes / 512))} 2>/dev/null;`;
  // No core dumps either: code that aborts its process again and again would write them into
  // Sluice's working dir wherever the operator's limit allows them.
  return [
    "/bin/sh",
    [
      "-c",
      `ulimit -c 0 2>/dev/null; ulimit -d ${kib} 2>/dev/null; ulimit -n ${SANDBOX_OPEN_FILES} 2>/dev/null;${files} exec "$0" "$@"`,
      process.execPath,
      ...args,
    ],
  ];
}

/** A folder the child may read and write, which its code names `/tmp` (`sandbox-tmp.ts`). */
export interface WritableTmp {
  readonly folder: string;
  /** The largest file it may write there, in bytes. */
  readonly maxFileBytes: number;
}

/**
 * Starts `entryPath` with read access to its folder and to `readDir` (a folder; a trailing `/` is
 * fine), and read and write access to `tmp.folder` when given; nothing else. Output is drained so
 * a chatty component never blocks on a full pipe.
 */
export function forkSandbox(
  entryPath: string,
  readDir: string,
  heapMb: number,
  listener: SandboxListener,
  tmp?: WritableTmp,
): SandboxProcess {
  const entryDir = dirname(entryPath);
  const config: SandboxChildConfig = {
    close: leakedDescriptors(),
    redact: [entryDir, readDir],
    ...(tmp ? { tmp: tmp.folder } : {}),
  };
  const writable = tmp ? [`--allow-fs-read=${tmp.folder}`, `--allow-fs-write=${tmp.folder}`] : [];
  const [command, args] = cappedCommand(
    [
      PERMISSION_FLAG,
      `--allow-fs-read=${entryDir}`,
      `--allow-fs-read=${readDir}`,
      ...writable,
      "--disable-warning=ExperimentalWarning",
      `--max-old-space-size=${heapMb}`,
      entryPath,
      JSON.stringify(config),
    ],
    heapMb,
    tmp?.maxFileBytes,
  );
  // fd 3: requests to the child; fd 4: the child's messages. Nothing else is passed on (the shell
  // execs node in its place: the same process).
  const child = spawn(command, args, { env: {}, stdio: ["ignore", "pipe", "pipe", "pipe", "pipe"] });
  const redact = pathRedactor(config.redact);
  const requests = child.stdio[REQUEST_FD] as Writable & Readable;
  const messages = child.stdio[MESSAGE_FD] as Readable;
  let stderr = "";
  let violated = false;
  const violate = (why: string) => {
    if (violated) return;
    violated = true;
    messages.removeAllListeners("data");
    messages.resume();
    listener.onViolation(why);
  };

  // A stream without an error listener would throw in this process: a child that closes its
  // ends early (EPIPE, ECONNRESET) must not take Sluice down. Its exit tells the rest.
  for (const stream of [requests, messages, child.stdout, child.stderr]) stream?.on("error", () => {});
  child.stdout?.resume();
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_TAIL);
  });
  // The runtime never writes to its request pipe.
  requests.on("data", () => violate("it wrote to its request channel"));

  const decoder = new LineDecoder(MAX_MESSAGE_BYTES);
  messages.setEncoding("utf8");
  messages.on("data", (chunk: string) => {
    let lines: string[];
    try {
      lines = decoder.push(chunk);
    } catch (error) {
      violate(`it sent ${(error as Error).message}`);
      return;
    }
    for (const line of lines) {
      const message = parseMessage(line);
      if (typeof message === "string") {
        violate(message);
        return;
      }
      listener.onMessage(message);
      if (violated) return;
    }
  });

  return {
    child,
    stderrTail: () => redact(stderr),
    send(batch) {
      if (batch.length === 0 || !requests.writable || violated) return;
      let text = "";
      for (const request of batch) {
        text += `${JSON.stringify(request)}\n`;
        if (text.length < WRITE_CHUNK_CHARS) continue;
        requests.write(text);
        text = "";
      }
      if (text.length > 0) requests.write(text);
      // What the child leaves unread is held here: a child that asks for replies (data store
      // calls) without reading them would have the server's memory grow without bound.
      if (requests.writableLength > MAX_UNREAD_REQUEST_BYTES) {
        violate(`it left over ${MAX_UNREAD_REQUEST_BYTES / 1024 / 1024} MiB sent to it unread`);
      }
    },
    unfinishedChars: () => decoder.pendingChars,
    redact,
    // Sockets have ref/unref though their stream types do not say so.
    handles: [child, requests, messages, child.stdout, child.stderr].filter((handle) => handle !== null) as Refable[],
  };
}

type Bag = Record<string, unknown>;
const isBag = (value: unknown): value is Bag => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * The message on `line`, or why it is none (in words). Only the envelope is checked here (on every
 * message, so by hand rather than with a schema): the contents of a result, a response or a
 * description are checked where they are used.
 */
export function parseMessage(line: string): SandboxMessage | string {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    return `it sent a message that is not JSON (${line.length} characters)`;
  }
  if (!isBag(message)) return "it sent a message that is not an object";
  switch (message.type) {
    case "ready":
    case "beat":
      return message as unknown as SandboxMessage;
    case "started":
    case "exiting":
    case "respond":
      if (typeof message.invocationId === "string") return message as unknown as SandboxMessage;
      break;
    case "data_store":
      if (typeof message.invocationId === "string" && Number.isSafeInteger(message.callId) && isBag(message.call)) {
        return message as unknown as SandboxMessage;
      }
      break;
    case "result":
      if (isBag(message.result) && typeof message.result.invocationId === "string") {
        return message as unknown as SandboxMessage;
      }
      break;
    case "described":
      if (typeof message.requestId === "string" && typeof message.ok === "boolean") {
        return message as unknown as SandboxMessage;
      }
      break;
    default:
      return "it sent a message of no known type";
  }
  return `it sent a malformed ${message.type} message`;
}

/** The bits of /proc/<pid>/fdinfo's `flags:` (octal) that mean close-on-exec. */
const O_CLOEXEC = 0o2000000;

/** A descriptor found without close-on-exec, and what it was then. */
interface Inherited {
  readonly fd: number;
  readonly dev: number;
  readonly ino: number;
}

let inherited: Inherited[] | undefined;

/**
 * This process's descriptors above the child's own (0 to 4) that a child would inherit: those
 * without close-on-exec. Node and libuv open everything with close-on-exec, so these came from
 * whatever started Sluice (a shell's `exec 40<file`, a supervisor's sockets): the full list is read
 * once, from /proc, at the first start. Before each later start only those are checked again
 * (still open, still the same file, still without close-on-exec): a stale number could name a
 * descriptor the child opened for itself, and reading the flags of every descriptor at each start
 * cost the server about 20 ms per start with a hundred children running.
 *
 * Linux only (/proc); elsewhere the list is empty and such descriptors reach the child.
 */
export function leakedDescriptors(): number[] {
  inherited ??= scanInherited();
  inherited = inherited.filter((entry) => {
    const now = inheritable(entry.fd);
    return now !== undefined && now.dev === entry.dev && now.ino === entry.ino;
  });
  return inherited.map((entry) => entry.fd);
}

/** `fd` as a child would inherit it, or undefined when it is closed or has close-on-exec. */
function inheritable(fd: number): Inherited | undefined {
  try {
    const flags = /^flags:\s+([0-7]+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))?.[1];
    if (flags === undefined || (Number.parseInt(flags, 8) & O_CLOEXEC) !== 0) return undefined;
    const stat = fstatSync(fd);
    return { fd, dev: stat.dev, ino: stat.ino };
  } catch {
    return undefined; // Closed (the descriptor readdir itself used is one).
  }
}

function scanInherited(): Inherited[] {
  let names: string[];
  try {
    names = readdirSync("/proc/self/fd");
  } catch {
    return [];
  }
  const found: Inherited[] = [];
  for (const name of names) {
    const fd = Number(name);
    const entry = fd > MESSAGE_FD ? inheritable(fd) : undefined;
    if (entry) found.push(entry);
  }
  return found;
}

/** Whether the child has not exited yet. */
export const isRunning = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

/** Why a child stopped, in words: `its process exited with code 1`, `... (out of memory)`. */
export function crashReason(code: number | null, signal: NodeJS.Signals | null, stderr: string): string {
  const how = signal ? `its process was killed by ${signal}` : `its process exited with code ${code}`;
  if (isOutOfMemory(stderr)) return `${how} (out of memory)`;
  const lastLine = stderr.trim().split("\n").at(-1);
  return lastLine ? `${how}: ${lastLine}` : how;
}

export const isOutOfMemory = (stderr: string) => /heap out of memory|Allocation failed/i.test(stderr);

/**
 * Evaluates the bundle at `bundlePath` in a fresh sandbox child (read access to the bundle's
 * folder) and returns its description. Whatever the code does (throws, outlives `timeoutMs`,
 * kills its process, breaks the protocol) is a failed reply; the child never outlives this call.
 *
 * @throws Error only when the child cannot be started.
 */
export function describeInSandbox(
  entryPath: string,
  bundlePath: string,
  limits: { readonly timeoutMs: number; readonly heapMb: number },
): Promise<DescribeReply> {
  const request: DescribeRequest = { type: "describe", requestId: "describe", bundlePath };
  const failed = (message: string): DescribeReply => ({ ok: false, error: { message } });

  return new Promise<DescribeReply>((resolve, reject) => {
    let settled = false;
    let asked = false;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // SIGKILL, not SIGTERM: user code may have installed a SIGTERM handler while loading.
      if (isRunning(sandbox.child)) sandbox.child.kill("SIGKILL");
      outcome();
    };
    const sandbox = forkSandbox(entryPath, `${dirname(bundlePath)}/`, limits.heapMb, {
      onMessage(message) {
        if (message.type === "ready") {
          // Sent only once the child listens; a repeat is the code's own (it runs while loading) and is refused.
          if (asked)
            finish(() =>
              resolve(failed("the component could not be loaded: its sandbox process said it was ready twice")),
            );
          asked = true;
          sandbox.send([request]);
        } else if (message.type === "described") {
          // The envelope is checked (`parseMessage`); the reply itself is parsed as on every platform.
          const { type: _type, requestId: _requestId, ...body } = message;
          const reply = parseDescribeReply(body);
          finish(() =>
            resolve(
              reply.ok
                ? reply.value
                : failed(
                    `the component could not be loaded: its sandbox process sent a malformed description (${reply.problem})`,
                  ),
            ),
          );
        }
      },
      onViolation(why) {
        finish(() => resolve(failed(`the component could not be loaded: its sandbox process was stopped: ${why}`)));
      },
    });
    const timer = setTimeout(
      () => finish(() => resolve(failed(`loading the component took longer than ${limits.timeoutMs / 1000}s`))),
      limits.timeoutMs,
    );
    sandbox.child.once("error", (error) => finish(() => reject(error)));
    sandbox.child.once("exit", (code, signal) =>
      finish(() =>
        resolve(failed(`the component could not be loaded: ${crashReason(code, signal, sandbox.stderrTail())}`)),
      ),
    );
  });
}
