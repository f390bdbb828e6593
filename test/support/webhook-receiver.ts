import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "vitest";

/** One request a {@link WebhookReceiver} got, with the status it answered. */
export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  status: number;
}

/**
 * A component whose HTTP interface emits the request body as it is, summarised by its `uid`: the
 * fault tests POST `{uid}` bodies to it and follow each uid to the receiver ({@link Receipt}).
 */
export const UID_EMITTER = `
export default {
  name: "Body emitter",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit(event.body, { summary: event.body.uid });
  },
};
`;

/** What the fault tests compare: a delivery's ids and the `uid` its emitted event carried. */
export interface Receipt {
  deliveryId: string;
  eventId: string;
  uid: string;
}

/**
 * A webhook receiver on 127.0.0.1 that records every request in arrival order and answers
 * `status` (200 at first; set it to make deliveries fail). `stop` and `start` again keep the port,
 * so a test can take the receiver down and bring it back.
 */
export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  status = 200;
  /** While true, requests are recorded (with status 0) and never answered: an attempt stays in flight. */
  hold = false;
  port = 0;
  /** The address it listens on. */
  host = "127.0.0.1";
  private server: Server | undefined;

  /** Starts a receiver on a free port (or `port`) of `host`. */
  static async start(port = 0, host = "127.0.0.1"): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    receiver.host = host;
    await receiver.start(port);
    return receiver;
  }

  async start(port = this.port): Promise<void> {
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const status = this.hold ? 0 : this.status;
        this.requests.push({
          method: request.method ?? "",
          path: request.url ?? "",
          headers: request.headers,
          body: Buffer.concat(chunks).toString("utf8"),
          status,
        });
        if (status === 0) return;
        response.writeHead(status, { "content-type": "text/plain" }).end("ok");
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, this.host, () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The URL of `path` on this receiver. */
  url(path = "/hook"): string {
    return `http://${this.host}:${this.port}${path}`;
  }

  /** Requests it answered with a 2xx. */
  get delivered(): ReceivedRequest[] {
    return this.requests.filter((r) => r.status >= 200 && r.status < 300);
  }

  /** Requests it answered with anything else. */
  get refused(): ReceivedRequest[] {
    return this.requests.filter((r) => r.status < 200 || r.status >= 300);
  }

  /** The 2xx deliveries as receipts: ids from the headers, `uid` from the emitted event. */
  get receipts(): Receipt[] {
    return this.delivered.map((r) => ({
      deliveryId: String(r.headers["x-sluice-delivery-id"]),
      eventId: String(r.headers["x-sluice-event-id"]),
      uid: String(JSON.parse(r.body).event.uid),
    }));
  }
}

/**
 * Fails unless each delivery id names one event and each event came under one delivery id: a
 * duplicate (a retry, a replay, a routing repeated after a crash) is only ever the same delivery.
 */
export function expectOneDeliveryIdPerEvent(receipts: readonly Receipt[]): void {
  const byDelivery = new Map<string, Set<string>>();
  const byEvent = new Map<string, Set<string>>();
  for (const receipt of receipts) {
    byDelivery.set(receipt.deliveryId, (byDelivery.get(receipt.deliveryId) ?? new Set()).add(receipt.eventId));
    byEvent.set(receipt.eventId, (byEvent.get(receipt.eventId) ?? new Set()).add(receipt.deliveryId));
  }
  expect([...byDelivery.values()].filter((eventIds) => eventIds.size > 1)).toEqual([]);
  expect([...byEvent.values()].filter((deliveryIds) => deliveryIds.size > 1)).toEqual([]);
}
