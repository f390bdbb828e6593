/**
 * Fetches `component_url` code over http(s) with a size limit, a timeout and a bounded number of
 * redirects. With `allowPrivateAddresses: false` (AWS) every address a host name resolves to is
 * checked before connecting, and the connection goes to the checked address (the check is the
 * socket's own DNS lookup), so DNS rebinding cannot slip a private address in between.
 *
 * A file that imports siblings by relative path (a registry component: `../../http.app.mjs`)
 * brings them: they are fetched against the URL ({@link fetchComponentTree}) through the same
 * guard, and the component is kept as packed files (`#core/component-files`). A GitHub `blob/`
 * page URL is read as its raw file.
 */
import type { IncomingMessage, RequestOptions } from "node:http";
import { get as httpsGet } from "node:https";
import { isIP } from "node:net";
import { fetchedComponentCode, MAX_COMPONENT_FILES, MAX_COMPONENT_FILES_BYTES } from "#core/component-files";
import { DomainError } from "#core/errors";
import { importSpecifiers } from "#core/import-specifiers";
import type { CodeFetcher } from "#core/ports/code-fetcher";
import { FORBIDDEN_ADDRESS, guardedLookup, isForbiddenAddress } from "./address-guard.ts";
import { isRelativeImport, type TreeBounds } from "./component-tree.ts";
import { nodeHttp } from "./node-http.ts";
import { componentUrlError, fetchComponentTree, rawFileUrl } from "./url-component-tree.ts";

const { get: httpGet } = nodeHttp;

export interface UrlCodeFetcherOptions {
  /** Local mode allows loopback and private addresses (a component served from the same machine). */
  readonly allowPrivateAddresses: boolean;
  /** @default 1 MiB, the API's own body limit */
  readonly maxBytes?: number;
  /** @default 10000 */
  readonly timeoutMs?: number;
  /** @default 3 */
  readonly maxRedirects?: number;
  /**
   * Bounds of the files a URL's imports bring.
   * @default 200 files and 1 MiB in all (as `component_files`), 16 imports deep, 400 requests, 60 s
   */
  readonly tree?: Partial<TreeBounds>;
}

const failed = componentUrlError;

export class UrlCodeFetcher implements CodeFetcher {
  private readonly maxBytes: number;
  private readonly timeoutMs: number;
  private readonly maxRedirects: number;
  private readonly tree: TreeBounds;

  constructor(private readonly options: UrlCodeFetcherOptions) {
    this.maxBytes = options.maxBytes ?? 1024 * 1024;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.maxRedirects = options.maxRedirects ?? 3;
    this.tree = {
      maxFiles: MAX_COMPONENT_FILES,
      maxBytes: MAX_COMPONENT_FILES_BYTES,
      maxDepth: 16,
      maxRequests: 400,
      deadlineMs: 60_000,
      ...options.tree,
    };
  }

  /** The code at `url`: its text, or packed files when it imports siblings by relative path. */
  async fetchCode(url: string): Promise<string> {
    const fetched = await this.fetchFinal(rawFileUrl(parseUrl(url)), this.maxBytes);
    if (fetched === undefined) throw failed("the server answered 404");
    const { text } = fetched;
    if (!importSpecifiers(text).some(isRelativeImport)) return text;
    // Imports resolve against where the entry was found, redirects followed, as a browser's do.
    const entry = fetched.url;
    const component = await fetchComponentTree(entry, text, this.tree, (file, maxBytes) =>
      // An import may not be sent elsewhere: same origin, through every redirect.
      this.fetchFile(file, maxBytes, file.origin),
    );
    return fetchedComponentCode(component);
  }

  /**
   * The text at `url`, following redirects (only to `origin` when given). `undefined` for a 404
   * or 410, so a caller trying where an import may be can try the next place.
   */
  private async fetchFile(url: URL, maxBytes: number, origin?: string): Promise<string | undefined> {
    return (await this.fetchFinal(url, maxBytes, origin))?.text;
  }

  /**
   * {@link fetchFile}, with the URL the text was found at. Its time limit is the file's, every
   * redirect included (each hop with a limit of its own made one file take 4 times as long).
   */
  private async fetchFinal(
    url: URL,
    maxBytes: number,
    origin?: string,
  ): Promise<{ text: string; url: URL } | undefined> {
    const until = Date.now() + this.timeoutMs;
    let current = url;
    for (let redirects = 0; ; redirects++) {
      const left = until - Date.now();
      if (left <= 0) throw failed(`no answer within ${this.timeoutMs / 1000}s`);
      const outcome = await this.fetchOnce(current, maxBytes, left);
      if (outcome.kind === "body") return { text: outcome.text, url: current };
      if (outcome.kind === "missing") return undefined;
      if (redirects >= this.maxRedirects) throw failed(`more than ${this.maxRedirects} redirects`);
      current = parseUrl(new URL(outcome.location, current).href);
      if (origin !== undefined && current.origin !== origin) {
        throw failed(`${url.pathname} redirects to another origin (${current.origin}); imports must stay on ${origin}`);
      }
    }
  }

  private fetchOnce(
    url: URL,
    maxBytes: number,
    timeoutMs: number,
  ): Promise<{ kind: "body"; text: string } | { kind: "redirect"; location: string } | { kind: "missing" }> {
    const host = url.hostname.replace(/^\[|\]$/g, "");
    if (!this.options.allowPrivateAddresses && isIP(host) && isForbiddenAddress(host)) {
      return Promise.reject(failed(`${url.hostname} is a private address`));
    }
    const requestOptions: RequestOptions = {
      timeout: timeoutMs,
      headers: { accept: "text/plain, application/javascript, */*", "user-agent": "sluice" },
    };
    if (!this.options.allowPrivateAddresses) requestOptions.lookup = guardedLookup as RequestOptions["lookup"];
    const get = url.protocol === "https:" ? httpsGet : httpGet;
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => {
        request.destroy(failed(`no answer within ${this.timeoutMs / 1000}s`));
      }, timeoutMs);
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
        if (status === 404 || status === 410) {
          response.resume();
          finish(() => resolve({ kind: "missing" }));
          return;
        }
        if (status < 200 || status >= 300) {
          response.resume();
          finish(() => reject(failed(`the server answered ${status}`)));
          return;
        }
        const declared = Number(response.headers["content-length"] ?? 0);
        if (declared > maxBytes) {
          response.destroy();
          finish(() => reject(failed(`the code is larger than ${maxBytes} bytes`)));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxBytes) {
            response.destroy();
            finish(() => reject(failed(`the code is larger than ${maxBytes} bytes`)));
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
