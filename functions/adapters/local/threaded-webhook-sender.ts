/**
 * Local mode's `WebhookSender`: the requests themselves (connections, writes, response parsing:
 * about two thirds of a delivery's CPU through node:http, less since decision 478) are made by a
 * worker thread running `Http1WebhookSender` (`webhook-send-thread.ts`), so they use another core
 * than the one serving the API and running the queue (decision 270). The thread is started on the first request from a bundle of its program
 * (tsx is not needed in it) and again after it stopped.
 *
 * A request the thread did not answer because it stopped rejects: the delivery worker then treats
 * the attempt as Sluice's failure (retried later, not counted), never as the receiver's.
 */
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { Logger } from "#core/ports/logger";
import type { WebhookSender, WebhookSendResult } from "#core/ports/webhook-sender";
import type { Http1WebhookSenderOptions } from "../http1-webhook-sender.ts";
import { programBundle } from "./sandbox-bundle.ts";

/** One request for the thread. */
export interface SendMessage {
  id: number;
  url: string;
  headers: Readonly<Record<string, string>>;
  body: string;
  timeoutMs: number;
  method: string | undefined;
}

/** The thread's answer to request `id`. */
export interface SentMessage {
  id: number;
  result: WebhookSendResult;
}

/** What the thread's sender is made with (plain data: it is the thread's `workerData`). */
type ThreadSenderOptions = Pick<Http1WebhookSenderOptions, "allowPrivateAddresses" | "maxResponseBytes">;

export interface ThreadedWebhookSenderOptions extends ThreadSenderOptions {
  /** Where the thread's program is bundled (`<workDir>/runtime/`). */
  workDir: string;
  log: Logger;
}

const THREAD_PROGRAM = fileURLToPath(new URL("./webhook-send-thread.ts", import.meta.url));

interface Pending {
  resolve: (result: WebhookSendResult) => void;
  reject: (error: Error) => void;
}

export class ThreadedWebhookSender implements WebhookSender {
  private thread: Promise<Worker> | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;
  /** Requests made in this microtask checkpoint, posted to the thread as one message. */
  private outgoing: SendMessage[] = [];

  constructor(private readonly options: ThreadedWebhookSenderOptions) {}

  async post(
    url: string,
    headers: Readonly<Record<string, string>>,
    body: string,
    timeoutMs: number,
    method?: string,
  ): Promise<WebhookSendResult> {
    if (this.closed) throw new Error("the webhook sender is closed");
    const thread = await this.started();
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      // A message to the thread costs about as much as a small request's own writes: the requests
      // of one checkpoint (several webhooks' lanes resumed by one answer) go together.
      if (this.outgoing.length === 0) queueMicrotask(() => this.postOutgoing(thread));
      this.outgoing.push({ id, url, headers, body, timeoutMs, method });
    });
  }

  private postOutgoing(thread: Worker): void {
    const batch = this.outgoing;
    this.outgoing = [];
    thread.postMessage(batch);
  }

  /** Stops the thread; requests in flight reject. */
  async close(): Promise<void> {
    this.closed = true;
    const thread = this.thread;
    this.thread = undefined;
    if (!thread) return;
    const worker = await thread.catch(() => undefined);
    if (!worker) return;
    const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
    // Closes its idle connections first, then the thread ends once nothing is left to do.
    worker.postMessage("close");
    const forced = setTimeout(() => void worker.terminate(), 1_000);
    await exited;
    clearTimeout(forced);
  }

  private started(): Promise<Worker> {
    this.thread ??= this.start();
    return this.thread;
  }

  private async start(): Promise<Worker> {
    const { workDir, log, allowPrivateAddresses, maxResponseBytes } = this.options;
    let program: string;
    try {
      program = await programBundle(workDir, THREAD_PROGRAM, "webhook-send-thread");
    } catch (error) {
      this.thread = undefined;
      throw error;
    }
    const senderOptions: ThreadSenderOptions = { allowPrivateAddresses, maxResponseBytes };
    const worker = new Worker(program, { workerData: senderOptions, execArgv: [] });
    // The delivery worker, not this thread, decides when the process may end.
    worker.unref();
    worker.on("message", (answers: SentMessage[]) => {
      for (const { id, result } of answers) {
        const waiting = this.pending.get(id);
        if (!waiting) continue;
        this.pending.delete(id);
        waiting.resolve(result);
      }
    });
    worker.on("error", (error) => log.error("the webhook sending thread failed", { error: String(error) }));
    worker.on("exit", (code) => {
      if (this.thread && !this.closed) log.warn("the webhook sending thread stopped; it is started again", { code });
      this.thread = undefined;
      const stranded = [...this.pending.values()];
      this.pending.clear();
      for (const { reject } of stranded) reject(new Error(`the webhook sending thread stopped (exit code ${code})`));
    });
    return worker;
  }
}
