/**
 * The response side of `Http1WebhookSender`: an incremental, bounded HTTP/1.1 response reader fed
 * the bytes of one connection. It reads the status line and the headers (at most
 * {@link MAX_HEAD_BYTES}, CRLF line ends, RFC 9112's framing rules as strictly as Node's llhttp:
 * no obsolete line folding, no whitespace before a colon, no `Content-Length` beside
 * `Transfer-Encoding`, no two different lengths), skips interim 1xx answers (at most
 * {@link MAX_INTERIM_RESPONSES}), then reads and drops the body framed by `Content-Length`,
 * chunked coding or the connection's end, up to a bound of raw bytes. Nothing of the body is kept.
 *
 * It never throws: a malformed answer sets {@link ResponseReader.error}; the caller reads
 * {@link ResponseReader.head} once it is set and {@link ResponseReader.state} after each feed.
 */

/** Status line and headers, as Node's default `--max-http-header-size`. */
export const MAX_HEAD_BYTES = 16 * 1024;
/** 100 Continue, 103 Early Hints...: interim answers skipped before the final one. */
export const MAX_INTERIM_RESPONSES = 8;
/** A chunk-size line or a trailer line. */
const MAX_LINE_BYTES = 4 * 1024;

export const HEAD = 0;
const LENGTH = 1;
const CHUNK_SIZE = 2;
const CHUNK_DATA = 3;
const CHUNK_DATA_END = 4;
const TRAILERS = 5;
const UNTIL_CLOSE = 6;
/** The whole response was read. */
export const DONE = 7;
/** Malformed or over a bound: the connection must be dropped. */
export const FAILED = 8;

export interface ResponseHead {
  status: number;
  /** HTTP/1.1 without `Connection: close`, and framed so that its end can be known. */
  reusable: boolean;
  /** The server's `Keep-Alive: timeout=N`, in ms, when it gave one. */
  keepAliveMs: number | undefined;
}

const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: [\t\x20-\x7e\x80-\xff]*)?$/;
const HEADER_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([\t\x20-\x7e\x80-\xff]*?)[ \t]*$/;
const CHUNK_SIZE_LINE = /^([0-9A-Fa-f]{1,12})(?:;[\t\x20-\x7e\x80-\xff]*)?$/;
const CRLF_CRLF = Buffer.from("\r\n\r\n", "latin1");
const LF_LF = Buffer.from("\n\n", "latin1");

export class ResponseReader {
  state = HEAD;
  head: ResponseHead | undefined;
  /** Why the response was refused (malformed, or over a bound). */
  error: string | undefined;
  /** Bytes came after the end of the response: the connection cannot carry another. */
  extra = false;
  private pending: Buffer | undefined;
  private remaining = 0;
  private bodyBytes = 0;
  private interim = 0;

  constructor(
    private readonly maxBodyBytes: number,
    /** A HEAD request: the answer has no body, whatever its headers say. */
    private readonly headRequest: boolean,
  ) {}

  /** Reads the bytes of one `data` event. */
  feed(chunk: Buffer): void {
    let offset = 0;
    while (offset < chunk.length) {
      const state = this.state;
      if (state === DONE) {
        this.extra = true;
        return;
      }
      if (state === FAILED) return;
      if (state === HEAD) {
        offset = this.readHead(chunk, offset);
        continue;
      }
      // Every byte after the head counts against the bound, framing included.
      const start = offset;
      if (state === LENGTH || state === CHUNK_DATA) {
        const take = Math.min(this.remaining, chunk.length - offset);
        this.remaining -= take;
        offset += take;
        if (this.remaining === 0) this.state = state === LENGTH ? DONE : CHUNK_DATA_END;
      } else if (state === UNTIL_CLOSE) {
        offset = chunk.length;
      } else {
        offset = this.readLine(chunk, offset);
      }
      this.bodyBytes += offset - start;
      if (this.bodyBytes > this.maxBodyBytes && this.state !== FAILED) {
        this.fail(`response body over ${this.maxBodyBytes} bytes`);
      }
    }
  }

  /** The connection ended: true when that ended the response (a body read until the close). */
  end(): boolean {
    if (this.state === UNTIL_CLOSE) {
      this.state = DONE;
      return true;
    }
    return this.state === DONE;
  }

  private fail(reason: string): void {
    this.state = FAILED;
    this.error = reason;
    this.pending = undefined;
  }

  private readHead(chunk: Buffer, offset: number): number {
    const before = this.pending?.length ?? 0;
    const bytes = this.pending ? Buffer.concat([this.pending, chunk.subarray(offset)]) : chunk.subarray(offset);
    const end = bytes.indexOf(CRLF_CRLF, Math.max(0, before - 3));
    if (end === -1 || end + 4 > MAX_HEAD_BYTES) {
      // A head ended by bare line feeds would otherwise wait for a CRLF CRLF that never comes.
      if (end === -1 && bytes.includes(LF_LF, Math.max(0, before - 1))) {
        this.fail("bare line feed in the head");
        return chunk.length;
      }
      if (bytes.length > MAX_HEAD_BYTES || end !== -1) {
        this.fail(`response head over ${MAX_HEAD_BYTES} bytes`);
        return chunk.length;
      }
      this.pending = Buffer.from(bytes);
      return chunk.length;
    }
    this.pending = undefined;
    this.parseHead(bytes.toString("latin1", 0, end));
    return offset + end + 4 - before;
  }

  private parseHead(text: string): void {
    const lines = text.split("\r\n");
    const statusLine = STATUS_LINE.exec(lines[0] ?? "");
    if (!statusLine) {
      this.fail("malformed status line");
      return;
    }
    const minor = statusLine[1];
    const status = Number(statusLine[2]);
    let length: string | undefined;
    let chunked: boolean | undefined;
    let close = minor === "0";
    let keepAliveMs: number | undefined;
    for (let i = 1; i < lines.length; i++) {
      const header = HEADER_LINE.exec(lines[i] as string);
      if (!header) {
        this.fail("malformed header line");
        return;
      }
      const name = (header[1] as string).toLowerCase();
      const value = header[2] as string;
      if (name === "content-length") {
        for (const part of value.split(",")) {
          const trimmed = part.trim();
          if (!/^\d{1,15}$/.test(trimmed)) {
            this.fail("malformed Content-Length");
            return;
          }
          if (length !== undefined && length !== trimmed) {
            this.fail("two different Content-Length values");
            return;
          }
          length = trimmed;
        }
      } else if (name === "transfer-encoding") {
        const codings = value.toLowerCase().split(",");
        chunked = (codings[codings.length - 1] as string).trim() === "chunked";
      } else if (name === "connection") {
        if (/(?:^|,)\s*close\s*(?:,|$)/i.test(value)) close = true;
      } else if (name === "keep-alive") {
        const timeout = /(?:^|,)\s*timeout=(\d{1,6})\s*(?:,|$)/i.exec(value);
        if (timeout) keepAliveMs = Number(timeout[1]) * 1000;
      }
    }
    if (status < 200 && status !== 101) {
      // An interim answer: the final one follows on the same connection.
      if (++this.interim > MAX_INTERIM_RESPONSES) {
        this.fail("too many interim responses");
        return;
      }
      return;
    }
    if (chunked !== undefined && length !== undefined) {
      this.fail("both Transfer-Encoding and Content-Length");
      return;
    }
    let reusable = !close;
    if (this.headRequest || status === 204 || status === 304 || status === 101) {
      this.state = DONE;
      if (status === 101) reusable = false;
    } else if (chunked === true) {
      this.state = CHUNK_SIZE;
    } else if (chunked === false) {
      // A transfer coding other than chunked last: the body runs to the connection's end.
      this.state = UNTIL_CLOSE;
      reusable = false;
    } else if (length !== undefined) {
      this.remaining = Number(length);
      this.state = this.remaining === 0 ? DONE : LENGTH;
    } else {
      this.state = UNTIL_CLOSE;
      reusable = false;
    }
    this.head = { status, reusable, keepAliveMs };
    if (this.state === LENGTH && this.remaining > this.maxBodyBytes) {
      this.fail(`response body over ${this.maxBodyBytes} bytes`);
    }
  }

  /** Reads one CRLF-ended line of the chunked framing and acts on it. */
  private readLine(chunk: Buffer, offset: number): number {
    const lf = chunk.indexOf(10, offset);
    if (lf === -1) {
      const rest = chunk.subarray(offset);
      this.pending = this.pending ? Buffer.concat([this.pending, rest]) : Buffer.from(rest);
      if (this.pending.length > MAX_LINE_BYTES) this.fail("chunked framing line too long");
      return chunk.length;
    }
    const tail = chunk.subarray(offset, lf + 1);
    const bytes = this.pending ? Buffer.concat([this.pending, tail]) : tail;
    this.pending = undefined;
    if (bytes.length > MAX_LINE_BYTES + 2) {
      this.fail("chunked framing line too long");
      return lf + 1;
    }
    if (bytes.length < 2 || bytes[bytes.length - 2] !== 13) {
      this.fail("malformed chunked framing");
      return lf + 1;
    }
    const line = bytes.toString("latin1", 0, bytes.length - 2);
    if (this.state === CHUNK_SIZE) {
      const size = CHUNK_SIZE_LINE.exec(line);
      if (!size) {
        this.fail("malformed chunk size");
      } else {
        this.remaining = Number.parseInt(size[1] as string, 16);
        this.state = this.remaining === 0 ? TRAILERS : CHUNK_DATA;
      }
    } else if (this.state === CHUNK_DATA_END) {
      if (line !== "") this.fail("malformed chunked framing");
      else this.state = CHUNK_SIZE;
    } else if (line === "") {
      this.state = DONE;
    } else if (!HEADER_LINE.test(line)) {
      this.fail("malformed trailer line");
    }
    return lf + 1;
  }
}
