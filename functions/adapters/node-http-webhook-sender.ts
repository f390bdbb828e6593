/**
 * `WebhookSender` over node:http / node:https (not `fetch`: its connection cannot be pinned to a
 * checked address without the undici package). One POST, no redirects followed, a time limit on
 * the whole exchange up to the status line, the response body read up to a bound and discarded.
 *
 * With `allowPrivateAddresses: false` (AWS), a literal IP host is checked before connecting and a
 * host name is resolved by the socket's own `lookup`, which refuses loopback, private, link-local
 * (169.254.0.0/16: cloud metadata), unique-local and IPv4-mapped forms of those
 * (`address-guard.ts`, shared with the component-URL fetcher). The connection goes to the very address that was
 * checked, so DNS rebinding cannot slip a private address in between the check and the connect.
 */
import type { IncomingMessage, RequestOptions } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import type { WebhookSender, WebhookSendResult } from "#core/ports/webhook-sender";
import { FORBIDDEN_ADDRESS, guardedLookup, isForbiddenAddress } from "./address-guard.ts";
import { nodeHttp } from "./node-http.ts";

const { Agent: HttpAgent, request: httpRequest } = nodeHttp;

export interface NodeHttpWebhookSenderOptions {
  /** Local mode allows loopback and private addresses (a receiver on the same machine). */
  readonly allowPrivateAddresses: boolean;
  /** Response bytes read (then dropped) before the connection is cut. @default 65536 */
  readonly maxResponseBytes?: number;
}

function describeError(error: NodeJS.ErrnoException, url: URL): string {
  if (error.code === FORBIDDEN_ADDRESS) return `refused: ${error.message}`;
  if (error.code === "ECONNREFUSED") return `ECONNREFUSED: ${url.host} refused the connection`;
  if (error.code === "ENOTFOUND" || error.code === "EAI_AGAIN")
    return `${error.code}: ${url.hostname} could not be resolved`;
  return error.code ? `${error.code}: ${error.message}` : error.message;
}

export class NodeHttpWebhookSender implements WebhookSender {
  private readonly maxResponseBytes: number;
  // Keep-alive agents: a busy webhook reuses its connection instead of a handshake per delivery.
  private readonly httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 64 });
  private readonly httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 64 });

  constructor(private readonly options: NodeHttpWebhookSenderOptions) {
    this.maxResponseBytes = options.maxResponseBytes ?? 64 * 1024;
  }

  async post(
    url: string,
    headers: Readonly<Record<string, string>>,
    body: string,
    timeoutMs: number,
    method = "POST",
  ): Promise<WebhookSendResult> {
    // Node throws, synchronously, on a method that is not a token: refused here as a failed attempt.
    if (!/^[A-Z]+$/.test(method)) return { error: "invalid HTTP method" };
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return { error: "invalid URL" };
    }
    if (target.protocol !== "http:" && target.protocol !== "https:") {
      return { error: `unsupported protocol ${target.protocol}` };
    }
    const host = target.hostname.replace(/^\[|\]$/g, "");
    if (!this.options.allowPrivateAddresses && isIP(host) && isForbiddenAddress(host)) {
      return { error: `refused: ${host} is a private address` };
    }
    const payload = Buffer.from(body, "utf8");
    const https = target.protocol === "https:";
    const requestOptions: RequestOptions = {
      method,
      agent: https ? this.httpsAgent : this.httpAgent,
      // A GET or HEAD without a body says nothing of one.
      headers:
        payload.length === 0 && (method === "GET" || method === "HEAD")
          ? { ...headers }
          : { ...headers, "content-length": String(payload.length) },
    };
    if (!this.options.allowPrivateAddresses) requestOptions.lookup = guardedLookup as RequestOptions["lookup"];
    const first = await this.exchange(target, requestOptions, payload, timeoutMs);
    // A kept-alive connection the receiver closed meanwhile (it restarted): once more on a new one,
    // as Node's documentation advises, rather than spend one of the delivery's attempts on it.
    if (!("staleConnection" in first)) return first;
    const second = await this.exchange(target, requestOptions, payload, timeoutMs);
    return "staleConnection" in second ? { error: second.error } : second;
  }

  private exchange(
    target: URL,
    requestOptions: RequestOptions,
    payload: Buffer,
    timeoutMs: number,
  ): Promise<WebhookSendResult | { error: string; staleConnection: true }> {
    const send = target.protocol === "https:" ? httpsRequest : httpRequest;
    return new Promise((resolve) => {
      let settled = false;
      const finish = (result: WebhookSendResult | { error: string; staleConnection: true }) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        resolve(result);
      };
      const request = send(target, requestOptions, (response: IncomingMessage) => {
        finish({ status: response.statusCode ?? 0 });
        this.discard(response, timeoutMs);
      });
      const deadline = setTimeout(() => {
        finish({ error: `timeout after ${timeoutMs} ms` });
        request.destroy();
      }, timeoutMs);
      request.on("error", (error: NodeJS.ErrnoException) => {
        const message = describeError(error, target);
        finish(
          request.reusedSocket && error.code === "ECONNRESET"
            ? { error: message, staleConnection: true }
            : { error: message },
        );
      });
      request.end(payload);
    });
  }

  /** Closes idle keep-alive connections (at shutdown). */
  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  /** Reads the response up to the bound and the time limit, so the connection can be reused; past either, cuts it. */
  private discard(response: IncomingMessage, timeoutMs: number): void {
    const cut = setTimeout(() => response.destroy(), timeoutMs);
    cut.unref();
    response.on("close", () => clearTimeout(cut));
    let size = 0;
    response.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > this.maxResponseBytes) response.destroy();
    });
    response.on("error", () => {});
  }
}
