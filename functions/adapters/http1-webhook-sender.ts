/**
 * `WebhookSender` as a small HTTP/1.1 client over `node:net` / `node:tls` (decision 478): a
 * kept-alive POST costs about a third of the CPU it cost through `node:http` when requests follow
 * each other, about 60% of it at 500 paced requests a second; node:http's request and response
 * objects, streams and parser callbacks were most of a small POST's work. One request per
 * connection at a time, kept-alive connections per origin (at most 64, the most recently used
 * first) and at most 256 idle over all origins (the longest idle closed first: receivers are a
 * user's URLs, so origins are unbounded), no redirects followed, a time limit on the whole exchange
 * up to the response's head, the response body read (`http1-response-reader.ts`, bounded and
 * strict) up to a bound and dropped.
 *
 * With `allowPrivateAddresses: false` (AWS), a literal IP host is checked before connecting and a
 * host name is resolved by the socket's own `lookup`, which refuses loopback, private, link-local
 * (169.254.0.0/16: cloud metadata), unique-local and IPv4-mapped forms of those
 * (`address-guard.ts`, shared with the component-URL fetcher). The connection goes to the very
 * address that was checked, so DNS rebinding cannot slip a private address in between the check
 * and the connect. TLS verifies the certificate against the host name (Node's defaults).
 *
 * The sender writes the framing itself: `Host` (from the URL), `Content-Length`, `Connection`;
 * a caller's headers of those names, and of the other hop-by-hop ones, are dropped. A header name
 * that is not an HTTP token, or a value with a character HTTP cannot carry, fails the request
 * before anything is sent.
 */
import { isIP, type LookupFunction, connect as netConnect, type Socket } from "node:net";
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import type { WebhookSender, WebhookSendResult } from "#core/ports/webhook-sender";
import { HEADER_NAME, HEADER_VALUE } from "#runtime/http-response";
import { FORBIDDEN_ADDRESS, guardedLookup, isForbiddenAddress } from "./address-guard.ts";
import { DONE, FAILED, ResponseReader } from "./http1-response-reader.ts";

export interface Http1WebhookSenderOptions {
  /** Local mode allows loopback and private addresses (a receiver on the same machine). */
  readonly allowPrivateAddresses: boolean;
  /** Response body bytes read (then dropped) before the connection is cut. @default 65536 */
  readonly maxResponseBytes?: number;
  /** Connections per origin, in use or idle. @default 64 */
  readonly maxConnectionsPerOrigin?: number;
  /** Idle kept-alive connections over all origins; past it the longest idle is closed. @default 256 */
  readonly maxIdleConnections?: number;
  /**
   * Resolves host names instead of the address guard's `lookup` (tests: a name that resolves
   * nowhere else). The connection goes where it answers.
   */
  readonly lookup?: LookupFunction;
  /** Extra trusted certificates (tests: a receiver with its own certificate authority). */
  readonly ca?: string | Buffer;
}

/** An idle connection is closed after this long, or 1 s before the server's `Keep-Alive: timeout`. */
const IDLE_MS = 15_000;
const SWEEP_MS = 1_000;

/** Headers the sender writes itself, or that describe a connection rather than the request. */
const SENDER_OWN = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "te",
  "trailer",
  "upgrade",
  "proxy-connection",
  "http2-settings",
]);
/** A request target as the URL parser leaves it: no space, control or non-ASCII character. */
const BAD_PATH = /[^\x21-\x7e]/;

type StaleResult = { error: string; staleConnection: true };
type ExchangeResult = WebhookSendResult | StaleResult;

function describeError(error: NodeJS.ErrnoException, host: string, hostname: string): string {
  if (error.code === FORBIDDEN_ADDRESS) return `refused: ${error.message}`;
  if (error.code === "ECONNREFUSED") return `ECONNREFUSED: ${host} refused the connection`;
  if (error.code === "ENOTFOUND" || error.code === "EAI_AGAIN")
    return `${error.code}: ${hostname} could not be resolved`;
  return error.code ? `${error.code}: ${error.message}` : error.message;
}

/** One request on its way: waiting for a connection, written, or reading its answer. */
class Exchange {
  answered = false;
  /** A byte of the answer came in. */
  received = false;
  connection: Connection | undefined;
  readonly reader: ResponseReader;
  timer: NodeJS.Timeout | undefined;

  constructor(
    readonly pool: OriginPool,
    readonly bytes: Buffer,
    headRequest: boolean,
    maxResponseBytes: number,
    private readonly resolve: (result: ExchangeResult) => void,
  ) {
    this.reader = new ResponseReader(maxResponseBytes, headRequest);
  }

  answer(result: ExchangeResult): void {
    if (this.answered) return;
    this.answered = true;
    this.resolve(result);
  }
}

class Connection {
  exchange: Exchange | undefined;
  /** It carried a whole exchange already: a failure before any answer may be its staleness. */
  reused = false;
  idleSince = 0;
  idleLimitMs = IDLE_MS;

  constructor(
    readonly pool: OriginPool,
    readonly socket: Socket | TLSSocket,
  ) {
    socket.setNoDelay(true);
    // As node:http's keep-alive agent: a peer gone without a word is noticed on an idle connection.
    socket.setKeepAlive(true, 1_000);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("end", () => this.onEnd());
    socket.on("error", (error: NodeJS.ErrnoException) => this.onError(error));
    socket.on("close", () => this.onClose());
  }

  start(exchange: Exchange): void {
    this.exchange = exchange;
    exchange.connection = this;
    this.socket.write(exchange.bytes);
  }

  private onData(chunk: Buffer): void {
    const exchange = this.exchange;
    // Bytes nobody asked for (an idle connection): the connection cannot be trusted with another request.
    if (!exchange) {
      this.destroy();
      return;
    }
    exchange.received = true;
    const reader = exchange.reader;
    reader.feed(chunk);
    if (!exchange.answered) {
      if (reader.head) {
        exchange.answer({ status: reader.head.status });
        // The rest of the body gets the same time again, then the connection is cut.
        exchange.timer?.refresh().unref();
      } else if (reader.error) {
        exchange.answer({ error: `malformed response: ${reader.error}` });
      }
    }
    if (reader.state === DONE) {
      this.finish(exchange, reader.head?.reusable === true && !reader.extra);
    } else if (reader.state === FAILED) {
      this.finish(exchange, false);
    }
  }

  /** The exchange is over: the connection goes back to its pool, or is closed. */
  private finish(exchange: Exchange, reusable: boolean): void {
    clearTimeout(exchange.timer);
    this.exchange = undefined;
    exchange.connection = undefined;
    // An answer that came before the whole request was written: the rest would precede the next one.
    if (!reusable || this.pool.sender.closed || this.socket.writableLength > 0) {
      this.destroy();
      return;
    }
    this.reused = true;
    const hint = exchange.reader.head?.keepAliveMs;
    this.idleLimitMs = hint === undefined ? IDLE_MS : Math.min(IDLE_MS, hint - 1_000);
    if (this.idleLimitMs <= 0) {
      this.destroy();
      return;
    }
    this.pool.release(this);
  }

  private onEnd(): void {
    const exchange = this.exchange;
    if (exchange?.reader.end()) {
      this.finish(exchange, false);
      return;
    }
    this.fail({ code: "ECONNRESET", message: "socket hang up" });
  }

  private onError(error: NodeJS.ErrnoException): void {
    this.fail(error);
  }

  private onClose(): void {
    this.fail({ code: "ECONNRESET", message: "socket hang up" });
    this.pool.closed(this);
  }

  /** The connection broke: the exchange on it, if not answered yet, fails (or is retried when stale). */
  private fail(error: { code?: string; message: string }): void {
    const exchange = this.exchange;
    this.exchange = undefined;
    if (exchange) {
      clearTimeout(exchange.timer);
      exchange.connection = undefined;
      const { host, hostname } = this.pool;
      const message = describeError(error as NodeJS.ErrnoException, host, hostname);
      const stale =
        this.reused &&
        !exchange.received &&
        (error.code === "ECONNRESET" || error.code === "EPIPE" || error.code === "ECONNABORTED");
      exchange.answer(stale ? { error: message, staleConnection: true } : { error: message });
    }
    this.destroy();
  }

  destroy(): void {
    if (!this.socket.destroyed) this.socket.destroy();
  }
}

/** The connections to one origin (scheme, host, port). */
class OriginPool {
  readonly idle: Connection[] = [];
  readonly waiting: Exchange[] = [];
  /** Connections open or opening, idle included. */
  readonly connections = new Set<Connection>();
  private tlsSession: Buffer | undefined;

  constructor(
    readonly sender: Http1WebhookSender,
    readonly key: string,
    readonly https: boolean,
    /** `host[:port]` as the URL has it (the `Host` header). */
    readonly host: string,
    /** The host name or address, without brackets. */
    readonly hostname: string,
    readonly port: number,
  ) {}

  acquire(exchange: Exchange): void {
    const now = Date.now();
    for (let idle = this.idle.pop(); idle; idle = this.idle.pop()) {
      this.sender.idleOrder.delete(idle);
      if (now - idle.idleSince < idle.idleLimitMs && !idle.socket.destroyed) {
        idle.start(exchange);
        return;
      }
      idle.destroy();
    }
    if (this.connections.size < this.sender.maxConnectionsPerOrigin) {
      this.open().start(exchange);
      return;
    }
    this.waiting.push(exchange);
  }

  /** An exchange gave up (its time ran out) before it got a connection. */
  withdraw(exchange: Exchange): void {
    const at = this.waiting.indexOf(exchange);
    if (at !== -1) this.waiting.splice(at, 1);
  }

  release(connection: Connection): void {
    const next = this.waiting.shift();
    if (next) {
      connection.start(next);
      return;
    }
    connection.idleSince = Date.now();
    this.idle.push(connection);
    this.sender.noteIdle(connection);
    this.sender.sweepLater();
  }

  closed(connection: Connection): void {
    this.connections.delete(connection);
    this.sender.idleOrder.delete(connection);
    const at = this.idle.indexOf(connection);
    if (at !== -1) this.idle.splice(at, 1);
    const next = this.waiting.shift();
    if (next) this.acquire(next);
    else if (this.connections.size === 0) this.sender.forget(this);
  }

  /** Closes the idle connections (all of them, or those idle for too long). */
  sweep(all: boolean): void {
    const now = Date.now();
    for (const connection of [...this.idle]) {
      if (all || now - connection.idleSince >= connection.idleLimitMs) connection.destroy();
    }
  }

  private open(): Connection {
    const { lookup, ca } = this.sender;
    let socket: Socket | TLSSocket;
    if (this.https) {
      const tls = tlsConnect({
        host: this.hostname,
        port: this.port,
        servername: isIP(this.hostname) ? undefined : this.hostname,
        lookup,
        ca,
        session: this.tlsSession,
      });
      tls.on("session", (session: Buffer) => {
        this.tlsSession = session;
      });
      socket = tls;
    } else {
      socket = netConnect({ host: this.hostname, port: this.port, lookup });
    }
    const connection = new Connection(this, socket);
    this.connections.add(connection);
    return connection;
  }
}

export class Http1WebhookSender implements WebhookSender {
  readonly maxConnectionsPerOrigin: number;
  readonly maxIdleConnections: number;
  /** Idle connections of every origin, the longest idle first. */
  readonly idleOrder = new Set<Connection>();
  readonly lookup: LookupFunction | undefined;
  readonly ca: string | Buffer | undefined;
  closed = false;
  private readonly maxResponseBytes: number;
  private readonly pools = new Map<string, OriginPool>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly options: Http1WebhookSenderOptions) {
    this.maxResponseBytes = options.maxResponseBytes ?? 64 * 1024;
    this.maxConnectionsPerOrigin = options.maxConnectionsPerOrigin ?? 64;
    this.maxIdleConnections = options.maxIdleConnections ?? 256;
    this.lookup = options.lookup ?? (options.allowPrivateAddresses ? undefined : (guardedLookup as LookupFunction));
    this.ca = options.ca;
  }

  async post(
    url: string,
    headers: Readonly<Record<string, string>>,
    body: string,
    timeoutMs: number,
    method = "POST",
  ): Promise<WebhookSendResult> {
    if (this.closed) return { error: "the webhook sender is closed" };
    if (!/^[A-Z]+$/.test(method)) return { error: "invalid HTTP method" };
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return { error: "invalid URL" };
    }
    const https = target.protocol === "https:";
    if (!https && target.protocol !== "http:") return { error: `unsupported protocol ${target.protocol}` };
    const hostname = target.hostname.replace(/^\[|\]$/g, "");
    if (!this.options.allowPrivateAddresses && isIP(hostname) && isForbiddenAddress(hostname)) {
      return { error: `refused: ${hostname} is a private address` };
    }
    const path = `${target.pathname}${target.search}`;
    if (BAD_PATH.test(path)) return { error: "invalid URL" };
    const bytes = this.serialise(method, path, target, headers, body);
    if (typeof bytes === "string") return { error: bytes };
    const headRequest = method === "HEAD";
    const first = await this.exchange(this.poolFor(target, hostname), bytes, headRequest, timeoutMs);
    // A kept-alive connection the receiver closed meanwhile (it restarted): once more on a new one,
    // rather than spend one of the delivery's attempts on it. Its idle siblings are as likely stale.
    if (!("staleConnection" in first)) return first;
    const pool = this.poolFor(target, hostname);
    pool.sweep(true);
    const second = await this.exchange(pool, bytes, headRequest, timeoutMs);
    return "staleConnection" in second ? { error: second.error } : second;
  }

  private poolFor(target: URL, hostname: string): OriginPool {
    const key = `${target.protocol}//${target.host}`;
    let pool = this.pools.get(key);
    if (!pool) {
      const https = target.protocol === "https:";
      const port = target.port === "" ? (https ? 443 : 80) : Number(target.port);
      pool = new OriginPool(this, key, https, target.host, hostname, port);
      this.pools.set(key, pool);
    }
    return pool;
  }

  /** The request's head and body as one buffer, or why it cannot be sent. */
  private serialise(
    method: string,
    path: string,
    target: URL,
    headers: Readonly<Record<string, string>>,
    body: string,
  ): Buffer | string {
    let head = `${method} ${path} HTTP/1.1\r\nHost: ${target.host}\r\n`;
    let authorization = false;
    for (const name in headers) {
      const value = headers[name] as string;
      if (!HEADER_NAME.test(name)) return "invalid header name";
      if (typeof value !== "string" || !HEADER_VALUE.test(value)) return `invalid value for header ${name}`;
      const lower = name.toLowerCase();
      if (SENDER_OWN.has(lower) || lower.startsWith("proxy-")) continue;
      if (lower === "authorization") authorization = true;
      head += `${name}: ${value}\r\n`;
    }
    // Credentials in the URL become Basic authorization, as node:http makes them.
    if (!authorization && (target.username !== "" || target.password !== "")) {
      let credentials: string;
      try {
        credentials = `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`;
      } catch {
        return "invalid URL: its credentials are not percent-encoded correctly";
      }
      head += `Authorization: Basic ${Buffer.from(credentials, "utf8").toString("base64")}\r\n`;
    }
    const bodyLength = Buffer.byteLength(body, "utf8");
    // A GET or HEAD without a body says nothing of one.
    if (bodyLength > 0 || (method !== "GET" && method !== "HEAD")) head += `Content-Length: ${bodyLength}\r\n`;
    head += "Connection: keep-alive\r\n\r\n";
    const headLength = head.length;
    const bytes = Buffer.allocUnsafe(headLength + bodyLength);
    bytes.write(head, 0, headLength, "latin1");
    if (bodyLength > 0) bytes.write(body, headLength, bodyLength, "utf8");
    return bytes;
  }

  private exchange(pool: OriginPool, bytes: Buffer, headRequest: boolean, timeoutMs: number): Promise<ExchangeResult> {
    // Closed meanwhile (a retry after `close`): no new connection.
    if (this.closed) return Promise.resolve({ error: "the webhook sender is closed" });
    return new Promise((resolve) => {
      const exchange = new Exchange(pool, bytes, headRequest, this.maxResponseBytes, resolve);
      exchange.timer = setTimeout(() => {
        if (!exchange.answered) exchange.answer({ error: `timeout after ${timeoutMs} ms` });
        pool.withdraw(exchange);
        // Cut the connection: whatever it carries now belongs to a request that was given up.
        exchange.connection?.destroy();
      }, timeoutMs);
      pool.acquire(exchange);
    });
  }

  /**
   * `connection` went idle: past the bound of idle connections over all origins, the longest idle
   * is closed (each one holds a descriptor of the process, and a tenant names as many origins as it likes).
   */
  noteIdle(connection: Connection): void {
    this.idleOrder.add(connection);
    if (this.idleOrder.size <= this.maxIdleConnections) return;
    const oldest = this.idleOrder.values().next().value as Connection;
    this.idleOrder.delete(oldest);
    oldest.destroy();
  }

  /** Starts the sweep of idle connections, if it is not running. */
  sweepLater(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => {
      for (const pool of this.pools.values()) pool.sweep(false);
      if ([...this.pools.values()].every((pool) => pool.idle.length === 0)) {
        clearInterval(this.sweeper);
        this.sweeper = undefined;
      }
    }, SWEEP_MS);
    this.sweeper.unref();
  }

  forget(pool: OriginPool): void {
    if (this.pools.get(pool.key) === pool && pool.waiting.length === 0) this.pools.delete(pool.key);
  }

  /** Closes every connection (at shutdown); later requests fail. */
  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    for (const pool of [...this.pools.values()]) {
      for (const exchange of pool.waiting.splice(0)) {
        clearTimeout(exchange.timer);
        exchange.answer({ error: "the webhook sender is closed" });
      }
      for (const connection of pool.connections) connection.destroy();
    }
  }
}
