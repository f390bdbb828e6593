/**
 * Messages between the local host (`functions/adapters/local/process-pool-host.ts`) and its sandbox
 * children (`sandbox-entry.ts`), and how they travel. No side effects: the host imports it.
 *
 * The channel is two plain pipes, not Node's IPC: the host writes requests on the child's fd 3 and
 * reads the child's messages from its fd 4, as newline-delimited JSON, one message per line (JSON
 * text has no raw newline). Component code runs in the child and can write anything to either
 * descriptor, so the host reads fd 4 with a frame limit ({@link MAX_MESSAGE_BYTES}) and a guarded
 * parse, and takes anything malformed as the child breaking the protocol (it is killed).
 *
 * Each write costs a system call on one side and a read on the other whatever its size: both
 * sides write what one tick produced as one write of several lines.
 */
import { pathToFileURL } from "node:url";
import type { ComponentDescription } from "./describe-component.ts";
import type {
  DataStoreReply,
  Invocation,
  InvocationResult,
  RespondMessage,
  ServiceCall,
  WorkflowInvocation,
  WorkflowResult,
} from "./protocol.ts";

/** Asks the child to evaluate the bundle at `bundlePath` and describe its export. */
export interface DescribeRequest {
  type: "describe";
  requestId: string;
  bundlePath: string;
}

/** Asks the child to run one invocation of the component bundled at `bundlePath`. */
export interface SourceInvokeRequest {
  type: "invoke";
  bundlePath: string;
  invocation: Invocation;
}

/**
 * Asks the child to run one run of a workflow (`invocation.kind` is `"workflow"`). `stepBundles`
 * gives the bundle path of step modules by code hash (the steps' `module`); the child loads each
 * module once, when a run first reaches a step that uses it. The host sends a child each hash's
 * path once (`stepBundles` holds only those it has not sent that child before, often none): the
 * child keeps every path it was given for the rest of its life.
 */
export interface WorkflowInvokeRequest {
  type: "invoke";
  stepBundles: Record<string, string>;
  invocation: WorkflowInvocation;
}

/** An `invoke` request; the child tells the two kinds apart by `invocation.kind`. */
export type InvokeRequest = SourceInvokeRequest | WorkflowInvokeRequest;

/**
 * Tells the child not to start an invocation it was sent: the host runs it elsewhere (the child
 * seemed blocked). An invocation already started goes on; its result is ignored.
 */
export interface CancelRequest {
  type: "cancel";
  invocationId: string;
}

/**
 * The host's answer to the child's {@link DataStoreCallMessage} with the same `callId` and
 * `invocationId` (a call forged by code in the child, naming another invocation, answers nothing).
 */
export interface DataStoreReplyRequest {
  type: "data_store_reply";
  invocationId: string;
  callId: number;
  reply: DataStoreReply;
}

export type SandboxRequest = DescribeRequest | InvokeRequest | CancelRequest | DataStoreReplyRequest;

/** Why a component could not be evaluated; `line`/`column` are positions in the user's source. */
export interface LoadFailure {
  message: string;
  line?: number;
  column?: number;
}

export type DescribeReply = { ok: true; description: ComponentDescription } | { ok: false; error: LoadFailure };

export type DescribedMessage = { type: "described"; requestId: string } & DescribeReply;

export interface ResultMessage {
  type: "result";
  /** A workflow run's result for a workflow request, an invocation's result otherwise. */
  result: InvocationResult | WorkflowResult;
}

export interface ReadyMessage {
  type: "ready";
}

/**
 * Sent every {@link SANDBOX_HEARTBEAT_MS} while the child has work and its event loop turns: a
 * busy child the host does not hear from for a few hundred milliseconds is blocked (a synchronous
 * loop). An idle child beats every {@link SANDBOX_IDLE_HEARTBEAT_MS} only: a hundred idle children
 * beating 20 times a second took a third of a core between them.
 */
export interface BeatMessage {
  type: "beat";
}

/**
 * Sent synchronously right before the child runs code of an invocation (its run, or the first
 * load of its bundle), together with whatever else the child had queued. The invocation the child
 * started last is the one whose code is likeliest to be running when the child blocks or dies.
 * Every `result` comes after its invocation's `started` (a load failure sends both at once).
 */
export interface StartedMessage {
  type: "started";
  invocationId: string;
}

/** Sent when code of an invocation ends or kills its own process (`process.exit`, `abort`, `kill`). */
export interface ExitingMessage {
  type: "exiting";
  invocationId: string;
}

/**
 * A `data_store` prop's method called by code of a running invocation; the host answers with a
 * {@link DataStoreReplyRequest}. `callId` is the child's own counter. Only between the
 * invocation's `started` and its `result`; everything in `call` is checked by trusted code.
 */
export interface DataStoreCallMessage {
  type: "data_store";
  invocationId: string;
  callId: number;
  call: ServiceCall;
}

/** Everything the child sends; `respond` comes before the `result` of the same invocation. */
export type SandboxMessage =
  | ReadyMessage
  | BeatMessage
  | StartedMessage
  | ExitingMessage
  | DescribedMessage
  | RespondMessage
  | DataStoreCallMessage
  | ResultMessage;

/**
 * The global (a `Symbol.for` key) a local bundle calls with its own URL as its top-level code
 * starts (`functions/adapters/local/sandbox-bundle.ts`): the child then says which invocation
 * loads it (`started`).
 */
export const EVALUATING_HOOK = "sluice.sandbox.evaluating";

/** How often a sandbox child with work in flight says it is alive. */
export const SANDBOX_HEARTBEAT_MS = 50;
/** How often an idle sandbox child says it is alive (code left behind may still block it). */
export const SANDBOX_IDLE_HEARTBEAT_MS = 1000;

/** The child's descriptor the host writes requests to, and the one it reads the child's messages from. */
export const REQUEST_FD = 3;
export const MESSAGE_FD = 4;

/**
 * The largest message a child may send, in bytes of its line. A result over it is replaced by an
 * error in the child; a longer line reaching the host is the child breaking the protocol. Bounds
 * what the host buffers per child.
 */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** What the host tells a child on its command line (one JSON argument). */
export interface SandboxChildConfig {
  /**
   * Descriptors the child inherited that it must not keep: the host's own descriptors without
   * close-on-exec. Closed before anything else runs.
   */
  close: number[];
  /** Folders whose absolute paths are taken out of stacks and messages the child sends. */
  redact: string[];
  /**
   * The folder the child may write to, which its code names `/tmp` (`tmp-folder.ts`); absent: no
   * writes at all (a describe).
   */
  tmp?: string;
}

/**
 * Splits a stream of text into lines (without their `\n`), at most `maxChars` characters each.
 * Fed with strings decoded by the stream (a UTF-8 character split between two chunks arrives
 * whole); a UTF-8 character takes at least one byte per UTF-16 unit, so a line of at most
 * {@link MAX_MESSAGE_BYTES} bytes is at most that many characters.
 */
export class LineDecoder {
  private partial = "";

  constructor(private readonly maxChars: number) {}

  /** Characters received of a line not finished yet. */
  get pendingChars(): number {
    return this.partial.length;
  }

  /**
   * The lines `chunk` finishes, in order.
   * @throws RangeError when a line grows over the limit; the decoder must not be used again.
   */
  push(chunk: string): string[] {
    const lines: string[] = [];
    let start = 0;
    let end = chunk.indexOf("\n");
    while (end >= 0) {
      const line = start === 0 && this.partial !== "" ? this.partial + chunk.slice(0, end) : chunk.slice(start, end);
      if (start === 0) this.partial = "";
      if (line.length > this.maxChars) throw tooLong(this.maxChars);
      lines.push(line);
      start = end + 1;
      end = chunk.indexOf("\n", start);
    }
    if (start < chunk.length) {
      if (this.partial.length + chunk.length - start > this.maxChars) throw tooLong(this.maxChars);
      this.partial += start === 0 ? chunk : chunk.slice(start);
    }
    return lines;
  }
}

const tooLong = (maxChars: number) => new RangeError(`a message longer than ${maxChars} bytes`);

/**
 * A function that takes the absolute paths of `folders` out of a text (a stack, an error message):
 * `file:///data/sandbox/sources/dc_x/<sha256>/component.ts:3:7` becomes `component.ts:3:7`, and
 * `/data/sandbox/runtime/sandbox-entry.mjs` becomes `sandbox-entry.mjs`. A content hash right
 * below a folder goes too, and a workflow's `steps/` folder below that hash. The server's paths (its data dir) are nobody's business.
 */
export function pathRedactor(folders: readonly string[]): (text: string) => string {
  const prefixes = folders
    .map((folder) => folder.replace(/\/+$/, ""))
    .filter((folder) => folder.length > 1)
    .sort((a, b) => b.length - a.length);
  if (prefixes.length === 0) return (text) => text;
  const alternatives = [
    ...new Set(prefixes.flatMap((folder) => [pathToFileURL(folder).href, `file://${folder}`, folder])),
  ];
  // A workflow's step modules are one folder further down (`<hash>/steps/`).
  const pattern = new RegExp(`(?:${alternatives.map(escapeRegExp).join("|")})/(?:[0-9a-f]{64}/(?:steps/)?)?`, "g");
  return (text) => (alternatives.some((prefix) => text.includes(prefix)) ? text.replace(pattern, "") : text);
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The host bundles the user's code with a source map beside the bundle, which the child reads when
 * a stack is formatted (`lazy-source-maps.ts`), so stack frames name the user's file
 * (`component.ts`) with its own lines.
 */
const USER_FRAME = /component\.ts:(\d+):(\d+)/;

/** Describes what the user's code threw. It can throw anything, not only an Error. */
export function toLoadFailure(thrown: unknown): LoadFailure {
  if (!(thrown instanceof Error)) return { message: `non-error thrown: ${String(thrown)}` };
  const code = (thrown as { code?: unknown }).code;
  // Node's permission errors say only "Access to this API has been restricted"; the code says which.
  const prefix = typeof code === "string" && !thrown.message.includes(code) ? `${code}: ` : "";
  const failure: LoadFailure = { message: `${prefix}${thrown.message}` };
  const position = USER_FRAME.exec(String(thrown.stack ?? ""));
  if (position) {
    failure.line = Number(position[1]);
    failure.column = Number(position[2]);
  }
  return failure;
}

/** A load failure as one line: `message (line L, column C)`. */
export function withPosition(failure: LoadFailure): string {
  if (failure.line === undefined) return failure.message;
  return `${failure.message} (line ${failure.line}${failure.column === undefined ? "" : `, column ${failure.column}`})`;
}
