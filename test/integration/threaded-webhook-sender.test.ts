import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ThreadedWebhookSender } from "#adapters/local/threaded-webhook-sender";
import { type Logger, silentLogger } from "#core/ports/logger";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

let workDir: string;
let receiver: WebhookReceiver;
let sender: ThreadedWebhookSender | undefined;

beforeAll(() => {
  workDir = mkdtempSync(join(tmpdir(), "sluice-send-thread-"));
});
afterAll(() => rmSync(workDir, { recursive: true, force: true }));
afterEach(async () => {
  await sender?.close();
  sender = undefined;
  await receiver?.stop();
});

function startSender(allowPrivateAddresses = true, log = silentLogger) {
  sender = new ThreadedWebhookSender({ allowPrivateAddresses, workDir, log });
  return sender;
}

describe("ThreadedWebhookSender", () => {
  it("sends the requests of one turn from its thread, each with its own headers, body and method, and answers each its status", async () => {
    receiver = await WebhookReceiver.start();
    const sending = startSender();
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, n) =>
        sending.post(
          receiver.url(`/hook/${n}`),
          { "x-n": String(n), "content-type": "application/json" },
          `{"n":${n}}`,
          5_000,
          n === 11 ? "PUT" : undefined,
        ),
      ),
    );
    expect(answers).toEqual(Array.from({ length: 12 }, () => ({ status: 200 })));
    const byPath = new Map(receiver.requests.map((request) => [request.path, request]));
    for (let n = 0; n < 12; n++) {
      const request = byPath.get(`/hook/${n}`);
      expect(request?.headers["x-n"]).toBe(String(n));
      expect(request?.body).toBe(`{"n":${n}}`);
      expect(request?.method).toBe(n === 11 ? "PUT" : "POST");
    }
    receiver.status = 503;
    expect(await sending.post(receiver.url(), {}, "{}", 5_000)).toEqual({ status: 503 });
  });

  it("keeps the address guard in the thread: loopback is refused without private addresses, and nothing is sent", async () => {
    receiver = await WebhookReceiver.start();
    const result = await startSender(false).post(receiver.url(), {}, "{}", 5_000);
    expect(result).toEqual({ error: expect.stringMatching(/^refused/) });
    expect(receiver.requests).toEqual([]);
  });

  it("answers a refused connection as a failed attempt", async () => {
    receiver = await WebhookReceiver.start();
    const url = receiver.url();
    await receiver.stop();
    expect(await startSender().post(url, {}, "{}", 5_000)).toEqual({ error: expect.stringMatching(/ECONNREFUSED/) });
  });

  it("rejects the requests a stopped thread never answered, says so, and starts a new thread for the next", async () => {
    receiver = await WebhookReceiver.start();
    receiver.hold = true;
    const warnings: string[] = [];
    const log: Logger = { ...silentLogger, warn: (message) => warnings.push(message) };
    const sending = startSender(true, log);
    const stranded = sending.post(receiver.url(), {}, "{}", 30_000);
    await expect.poll(() => receiver.requests.length).toBe(1);
    // The thread dies as a crash would end it.
    await (await sending["thread"])?.terminate();
    await expect(stranded).rejects.toThrow(/thread stopped/);
    expect(warnings).toEqual(["the webhook sending thread stopped; it is started again"]);
    receiver.hold = false;
    expect(await sending.post(receiver.url(), {}, "{}", 5_000)).toEqual({ status: 200 });
  });

  it("settles a request in flight when closed, and refuses requests after", async () => {
    receiver = await WebhookReceiver.start();
    receiver.hold = true;
    const sending = startSender();
    const inFlight = sending.post(receiver.url(), {}, "{}", 30_000);
    await expect.poll(() => receiver.requests.length).toBe(1);
    await sending.close();
    // Either answered as cut short by the thread, or stranded when it ended: never left hanging.
    const settled = await inFlight.then(
      (result) => ("error" in result ? "error" : "status"),
      () => "rejected",
    );
    expect(["error", "rejected"]).toContain(settled);
    await expect(sending.post(receiver.url(), {}, "{}", 1_000)).rejects.toThrow(/closed/);
  });
});
