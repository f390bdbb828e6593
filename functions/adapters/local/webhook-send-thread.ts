/**
 * The program of local mode's webhook sending thread (`ThreadedWebhookSender`): it makes the HTTP
 * requests of webhook deliveries and `$.send.http` with `Http1WebhookSender`, on the second core,
 * and answers each with its result. It holds no secret and reads no store: what it sends (headers
 * already signed, the body) comes from the main thread, which keeps the queue and the retry policy.
 */
import { parentPort, workerData } from "node:worker_threads";
import { Http1WebhookSender, type Http1WebhookSenderOptions } from "../http1-webhook-sender.ts";
import type { SendMessage, SentMessage } from "./threaded-webhook-sender.ts";

if (!parentPort) throw new Error("webhook-send-thread runs as a worker thread");
const port = parentPort;
const sender = new Http1WebhookSender(workerData as Http1WebhookSenderOptions);

/** Answers ready in this microtask checkpoint, posted back as one message. */
let answers: SentMessage[] = [];

function answer(message: SentMessage): void {
  if (answers.length === 0) {
    queueMicrotask(() => {
      const batch = answers;
      answers = [];
      port.postMessage(batch);
    });
  }
  answers.push(message);
}

port.on("message", (message: SendMessage[] | "close") => {
  if (message === "close") {
    sender.close();
    port.close();
    return;
  }
  for (const { id, url, headers, body, timeoutMs, method } of message) {
    sender.post(url, headers, body, timeoutMs, method).then(
      (result) => answer({ id, result }),
      // `post` never rejects for the network; anything else is reported as an attempt that failed.
      (error: unknown) => answer({ id, result: { error: String(error) } }),
    );
  }
});
