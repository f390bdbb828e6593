/**
 * Fetches `component_url` code over http(s) with a size limit, a timeout and a bounded number of
 * redirects. With `allowPrivateAddresses: false` (AWS) every address a host name resolves to is
 * checked before connecting, and the connection goes to the checked address (the check is the
 * socket's own DNS lookup), so DNS rebinding cannot slip a private address in between.
 */
import { get as httpGet, type IncomingMessage, type RequestOptions } from "node:http";
import { get as httpsGet } from "node:https";
import { isIP } from "node:net";
import { DomainError } from "#core/errors";
import type { CodeFetcher } from "#core/ports/code-fetcher";
import { FORBIDDEN_ADDRESS, guardedLookup, isForbiddenAddress } from "./address-guard.ts";

export interface UrlCodeFetcherOptions {
  /** Local mode allows loopback and private addresses (a component served from the same machine). */
  readonly allowPrivateAddresses: boolean;
  /** @default 1 MiB, the API's own body limit */
  readonly maxBytes?: number;
  /** @default 10000 */
  readonly timeoutMs?: number;
  /** @default 3 */
  readonly maxRedirects?: number;
}

const FIELD = "component_url";
const failed = (message: string) => new DomainError("validation", `${FIELD}: ${message}`, [{ field: FIELD, message }]);

export class UrlCodeFetcher implements CodeFetcher {
  private readonly maxBytes: number;
  private readonly timeoutMs: number;
  private readonly maxRedirects: number;

  constructor(private readonly options: UrlCodeFetcherOptions) {
    this.maxBytes = options.maxBytes ?? 1024 * 1024;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.maxRedirects = options.maxRedirects ?? 3;
  }

  async fetchCode(url: string): Promise<string> {
    let current = parseUrl(url);
    for (let redirects = 0; ; redirects++) {
      const outcome = await this.fetchOnce(current);
      if (outcome.kind === "body") return outcome.text;
      if (redirects >= this.maxRedirects) throw failed(`more than ${this.maxRedirects} redirects`);
      current = parseUrl(new URL(outcome.location, current).href);
    }
  }

  private fetchOnce(url: URL): Promise<{ kind: "body"; text: string } | { kind: "redirect"; location: string }> {
    const host = url.hostname.replace(/^\[|\]$/g, "");
    if (!this.options.allowPrivateAddresses && isIP(host) && isForbiddenAddress(host)) {
      return Promise.reject(failed(`${url.hostname} is a private address`));
    }
    const requestOptions: RequestOptions = {
      timeout: this.timeoutMs,
      headers: { accept: "text/plain, application/javascript, */*", "user-agent": "sluice" },
    };
    if (!this.options.allowPrivateAddresses) requestOptions.lookup = guardedLookup as RequestOptions["lookup"];
    const get = url.protocol === "https:" ? httpsGet : httpGet;
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => {
        request.destroy(failed(`no answer within ${this.timeoutMs / 1000}s`));
      }, this.timeoutMs);
      const finish = (action: () => void) => {
        clearTimeout(deadline);
        action();
      };
      const request = get(url, requestOptions, (response: IncomingMessage) => {
        const status = response.statusCode ?? 0;
        if (status >= 300 && status < 400 && response.headers.location) {
          response.resume();
          finish(() => resolve({ kind: "redirect", location: response.headers.location as string }));
          return;
        }
        if (status < 200 || status >= 300) {
          response.resume();
          finish(() => reject(failed(`the server answered ${status}`)));
          return;
        }
        const declared = Number(response.headers["content-length"] ?? 0);
        if (declared > this.maxBytes) {
          response.destroy();
          finish(() => reject(failed(`the code is larger than ${this.maxBytes} bytes`)));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > this.maxBytes) {
            response.destroy();
            finish(() => reject(failed(`the code is larger than ${this.maxBytes} bytes`)));
            return;
          }
          chunks.push(chunk);
        });
        response.on("end", () => finish(() => resolve({ kind: "body", text: Buffer.concat(chunks).toString("utf8") })));
        response.on("error", (error) => finish(() => reject(failed(error.message))));
      });
      request.on("timeout", () => request.destroy(failed(`no answer within ${this.timeoutMs / 1000}s`)));
      request.on("error", (error: NodeJS.ErrnoException) => {
        finish(() => reject(error instanceof DomainError ? error : failed(describeNetworkError(error, url))));
      });
    });
  }
}

function describeNetworkError(error: NodeJS.ErrnoException, url: URL): string {
  if (error.code === FORBIDDEN_ADDRESS) return error.message;
  if (error.code === "ENOTFOUND" || error.code === "EAI_AGAIN") return `${url.hostname} could not be resolved`;
  if (error.code === "ECONNREFUSED") return `${url.host} refused the connection`;
  return `could not be fetched: ${error.message}`;
}

function parseUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw failed("is not a valid URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw failed("must be an http or https URL");
  if (!url.hostname) throw failed("must have a host name");
  if (url.username || url.password) throw failed("must not carry credentials");
  return url;
}
