/**
 * `ProviderHttp` over node:http / node:https: one request, no redirect followed (a 3xx is an
 * answer like any other), one time limit on the whole exchange, the answer read up to a bound.
 *
 * With `allowPrivateAddresses: false` (AWS) a literal IP host is checked before connecting and a
 * host name is resolved by the socket's own guarded `lookup` (`address-guard.ts`, shared with
 * webhooks and the component-URL fetcher), so DNS rebinding cannot slip a private address in.
 * Errors name the failure, never the URL or a header: test requests carry tokens in both.
 */
import type { IncomingMessage, RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import type { ProviderHttp, ProviderRequest, ProviderResponse } from "#core/ports/provider-http";
import { FORBIDDEN_ADDRESS, guardedLookup, isForbiddenAddress } from "./address-guard.ts";
import { nodeHttp } from "./node-http.ts";

const { request: httpRequest } = nodeHttp;

export interface NodeHttpProviderClientOptions {
  /** Local mode may allow loopback and private addresses (a provider on the same machine). */
  readonly allowPrivateAddresses: boolean;
}

function describeError(error: NodeJS.ErrnoException): string {
  if (error.code === FORBIDDEN_ADDRESS) return "refused: the provider's host is a private address";
  if (error.code === "ECONNREFUSED") return "ECONNREFUSED: the provider refused the connection";
  if (error.code === "ENOTFOUND" || error.code === "EAI_AGAIN") return `${error.code}: the host could not be resolved`;
  return error.code ? `${error.code}: the request failed` : "the request failed";
}

export class NodeHttpProviderClient implements ProviderHttp {
  constructor(private readonly options: NodeHttpProviderClientOptions) {}

  async request(request: ProviderRequest): Promise<ProviderResponse> {
    if (!/^[A-Z]+$/.test(request.method)) return { error: "invalid HTTP method" };
    let target: URL;
    try {
      target = new URL(request.url);
    } catch {
      return { error: "invalid URL" };
    }
    if (target.protocol !== "http:" && target.protocol !== "https:") return { error: "the URL is not http(s)" };
    const host = target.hostname.replace(/^\[|\]$/g, "");
    if (!this.options.allowPrivateAddresses && isIP(host) && isForbiddenAddress(host)) {
      return { error: "refused: the provider's host is a private address" };
    }
    const payload = Buffer.from(request.body ?? "", "utf8");
    const headers: Record<string, string> = { "user-agent": "sluice", ...request.headers };
    if (request.body !== undefined) headers["content-length"] = String(payload.length);
    const options: RequestOptions = { method: request.method, headers };
    if (!this.options.allowPrivateAddresses) options.lookup = guardedLookup as RequestOptions["lookup"];
    try {
      return await this.exchange(target, options, payload, request);
    } catch {
      // Node throws synchronously on a header value it refuses (a newline): named, never quoted.
      return { error: "invalid request header" };
    }
  }

  private exchange(
    target: URL,
    options: RequestOptions,
    payload: Buffer,
    { timeoutMs, maxResponseBytes }: ProviderRequest,
  ): Promise<ProviderResponse> {
    const send = target.protocol === "https:" ? httpsRequest : httpRequest;
    return new Promise((resolve) => {
      let settled = false;
      const finish = (result: ProviderResponse) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        resolve(result);
        request.destroy();
      };
      const request = send(target, options, (response: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxResponseBytes) finish({ error: `the answer is larger than ${maxResponseBytes} bytes` });
          else chunks.push(chunk);
        });
        response.on("end", () =>
          finish({
            status: response.statusCode ?? 0,
            contentType: String(response.headers["content-type"] ?? ""),
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        response.on("error", () => finish({ error: "the answer was cut short" }));
      });
      const deadline = setTimeout(() => finish({ error: `no answer within ${timeoutMs} ms` }), timeoutMs);
      request.on("error", (error: NodeJS.ErrnoException) => finish({ error: describeError(error) }));
      request.end(payload);
    });
  }
}
