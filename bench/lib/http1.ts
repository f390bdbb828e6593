/**
 * The smallest HTTP/1.1 client that a load generator needs, on raw sockets: requests are
 * serialised once per call, answers parsed incrementally (Content-Length or chunked bodies).
 * It costs a fraction of `node:http`'s client per request, so on a 2-core machine more of the
 * CPU is left to the server under test.
 */
import { connect, type Socket } from "node:net";

export interface ParsedResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

const CRLF = Buffer.from("\r\n");
const HEADER_END = Buffer.from("\r\n\r\n");

/** Serialises a request with a keep-alive connection and an exact Content-Length. */
export function serializeRequest(
  method: string,
  host: string,
  path: string,
  headers: Record<string, string>,
  body: string | undefined,
): Buffer {
  const payload = body === undefined ? undefined : Buffer.from(body, "utf8");
  let head = `${method} ${path} HTTP/1.1\r\nhost: ${host}\r\nconnection: keep-alive\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  if (payload) head += `content-length: ${payload.length}\r\n`;
  head += "\r\n";
  return payload ? Buffer.concat([Buffer.from(head, "latin1"), payload]) : Buffer.from(head, "latin1");
}

/**
 * Incremental parser of the responses on one connection, in order. `feed` returns the responses
 * completed by the chunk. HEAD and 1xx answers are not supported (the bench sends neither).
 */
export class ResponseParser {
  private buffer: Buffer = Buffer.alloc(0);
  private head: { status: number; headers: Record<string, string> } | undefined;
  private chunks: Buffer[] = [];

  feed(chunk: Buffer): ParsedResponse[] {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    const done: ParsedResponse[] = [];
    for (;;) {
      const response = this.next();
      if (!response) return done;
      done.push(response);
    }
  }

  private next(): ParsedResponse | undefined {
    if (!this.head) {
      const end = this.buffer.indexOf(HEADER_END);
      if (end < 0) return undefined;
      const lines = this.buffer.subarray(0, end).toString("latin1").split("\r\n");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1]);
      if (!Number.isInteger(status)) throw new Error(`not an HTTP response: ${JSON.stringify(lines[0])}`);
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(":");
        if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      this.head = { status, headers };
      this.buffer = this.buffer.subarray(end + HEADER_END.length);
      this.chunks = [];
    }
    const { status, headers } = this.head;
    if (/\bchunked\b/i.test(headers["transfer-encoding"] ?? "")) {
      for (;;) {
        const lineEnd = this.buffer.indexOf(CRLF);
        if (lineEnd < 0) return undefined;
        const size = Number.parseInt(this.buffer.subarray(0, lineEnd).toString("latin1"), 16);
        if (!Number.isInteger(size) || size < 0) throw new Error("malformed chunk size");
        if (size === 0) {
          // The last chunk: no trailers are expected, just the final CRLF.
          if (this.buffer.length < lineEnd + 4) return undefined;
          this.buffer = this.buffer.subarray(lineEnd + 4);
          return this.finish(status, headers, Buffer.concat(this.chunks));
        }
        if (this.buffer.length < lineEnd + 2 + size + 2) return undefined;
        this.chunks.push(this.buffer.subarray(lineEnd + 2, lineEnd + 2 + size));
        this.buffer = this.buffer.subarray(lineEnd + 2 + size + 2);
      }
    }
    const length = Number(headers["content-length"] ?? 0);
    if (this.buffer.length < length) return undefined;
    const body = this.buffer.subarray(0, length);
    this.buffer = this.buffer.subarray(length);
    return this.finish(status, headers, body);
  }

  private finish(status: number, headers: Record<string, string>, body: Buffer): ParsedResponse {
    this.head = undefined;
    this.chunks = [];
    return { status, headers, body };
  }
}

/**
 * One keep-alive connection that sends one request at a time. `send` resolves with the answer,
 * or rejects on a network error, a closed connection or `timeoutMs`; the connection is then
 * dropped and the next `send` opens a new one.
 */
export class Connection {
  private socket: Socket | undefined;
  private parser = new ResponseParser();
  private waiting: { resolve: (response: ParsedResponse) => void; reject: (error: Error) => void } | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly timeoutMs: number,
  ) {}

  send(request: Buffer): Promise<ParsedResponse> {
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.timer = setTimeout(() => this.fail(new Error(`timeout after ${this.timeoutMs} ms`)), this.timeoutMs);
      this.open().write(request);
    });
  }

  close(): void {
    this.socket?.destroy();
    this.socket = undefined;
  }

  private open(): Socket {
    if (this.socket && !this.socket.destroyed) return this.socket;
    const socket = connect({ host: this.host, port: this.port, noDelay: true });
    this.parser = new ResponseParser();
    // Events of a socket that was already dropped (after a failure) must not touch the next one.
    socket.on("data", (chunk: Buffer) => {
      if (this.socket !== socket) return;
      let responses: ParsedResponse[];
      try {
        responses = this.parser.feed(chunk);
      } catch (error) {
        return this.fail(error as Error);
      }
      for (const response of responses) {
        const waiting = this.waiting;
        this.waiting = undefined;
        clearTimeout(this.timer);
        if (response.headers.connection?.toLowerCase() === "close") this.close();
        waiting?.resolve(response);
      }
    });
    socket.on("error", (error) => {
      if (this.socket === socket) this.fail(error);
    });
    socket.on("close", () => {
      if (this.socket === socket) this.fail(new Error("connection closed"));
    });
    this.socket = socket;
    return socket;
  }

  private fail(error: Error): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    clearTimeout(this.timer);
    this.close();
    waiting?.reject(error);
  }
}
