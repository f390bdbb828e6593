import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DONE, FAILED, HEAD, MAX_HEAD_BYTES, ResponseReader } from "#adapters/http1-response-reader";

/** What a reader made of `bytes` fed in the pieces `cuts` gives (offsets where a new `data` event starts). */
function read(bytes: string, cuts: number[] = [], maxBody = 65_536, headRequest = false) {
  const reader = new ResponseReader(maxBody, headRequest);
  const buffer = Buffer.from(bytes, "latin1");
  let from = 0;
  for (const cut of [...cuts, buffer.length]) {
    reader.feed(buffer.subarray(from, cut));
    from = cut;
  }
  return { state: reader.state, head: reader.head, error: reader.error, extra: reader.extra, reader };
}

const RESPONSES: [string, string][] = [
  ["a length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"],
  ["no reason phrase", "HTTP/1.1 204\r\n\r\n"],
  [
    "chunks, extensions and trailers",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n",
  ],
  [
    "interim answers",
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n",
  ],
  ["equal lengths in a list", "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok"],
  ["a malformed chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n"],
  ["a bare LF in a header", "HTTP/1.1 200 OK\r\nX-A: b\nc\r\nContent-Length: 0\r\n\r\n"],
];

describe("ResponseReader", () => {
  it.each(RESPONSES)("reads %s the same whatever the pieces it comes in", (_, response) => {
    const whole = read(response);
    const { reader: _whole, ...expected } = whole;
    for (let cut = 1; cut < response.length; cut++) {
      const { reader: _split, ...split } = read(response, [cut]);
      expect(split, `cut at ${cut}`).toEqual(expected);
    }
    const { reader: _bytes, ...byBytes } = read(
      response,
      Array.from({ length: response.length - 1 }, (_, i) => i + 1),
    );
    expect(byBytes).toEqual(expected);
  });

  it("reads a response to its end and says whether its connection can carry another", () => {
    expect(read(RESPONSES[0]?.[1] as string)).toMatchObject({
      state: DONE,
      head: { status: 200, reusable: true, keepAliveMs: undefined },
      extra: false,
    });
    expect(read(RESPONSES[2]?.[1] as string)).toMatchObject({ state: DONE, head: { status: 200, reusable: true } });
    expect(read(RESPONSES[3]?.[1] as string)).toMatchObject({ state: DONE, head: { status: 202 } });
    expect(read("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n").head?.reusable).toBe(
      false,
    );
    expect(read("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").head?.reusable).toBe(false);
    expect(read("HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 0\r\n\r\n").head).toEqual({
      status: 200,
      reusable: true,
      keepAliveMs: 5_000,
    });
    // Bytes past the end: another response the sender did not ask for.
    expect(read(`${RESPONSES[0]?.[1]}HTTP/1.1 200 OK\r\n`).extra).toBe(true);
  });

  it("reads no body after a HEAD, a 204, a 304, and none but to the close without framing", () => {
    expect(read("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", [], 65_536, true).state).toBe(DONE);
    expect(read("HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n").state).toBe(DONE);
    const untilClose = read("HTTP/1.1 200 OK\r\n\r\nsome bytes");
    expect(untilClose.head?.reusable).toBe(false);
    expect(untilClose.state).not.toBe(DONE);
    expect(untilClose.reader.end()).toBe(true);
    expect(untilClose.reader.state).toBe(DONE);
    // A connection that ends inside a length-framed body did not end the response.
    const cut = read("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    expect(cut.reader.end()).toBe(false);
    // A coding other than chunked last: read to the close.
    expect(read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nxx").head?.reusable).toBe(false);
  });

  it("bounds the body in raw bytes, chunk framing included, and refuses a length over the bound at once", () => {
    const chunks = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${"1\r\nx\r\n".repeat(30)}`;
    expect(read(chunks, [], 100)).toMatchObject({ state: FAILED, error: "response body over 100 bytes" });
    expect(read(chunks, [], 1_000).state).not.toBe(FAILED);
    const long = read("HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n", [], 100);
    expect(long).toMatchObject({ state: FAILED, head: { status: 200 } });
  });

  it("bounds the head and the lines of the chunked framing", () => {
    const head = `HTTP/1.1 200 OK\r\nX-Big: ${"a".repeat(MAX_HEAD_BYTES)}`;
    expect(read(head, [100, 5_000])).toMatchObject({
      state: FAILED,
      error: `response head over ${MAX_HEAD_BYTES} bytes`,
    });
    expect(read(`HTTP/1.1 200 OK\r\nX-A: ${"a".repeat(100)}`).state).toBe(HEAD);
    const line = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;${"e".repeat(5_000)}`;
    expect(read(line)).toMatchObject({ state: FAILED, error: "chunked framing line too long" });
  });

  it("never throws on hostile bytes, and keeps no more than its bounds whatever the pieces", () => {
    const pieces = fc.array(
      fc.oneof(
        fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
        fc
          .constantFrom(
            "HTTP/1.1 200 OK\r\n",
            "Transfer-Encoding: chunked\r\n",
            "Content-Length: 3\r\n",
            "\r\n",
            "5\r\n",
            "0\r\n",
            "\n",
          )
          .map((text) => Buffer.from(text, "latin1")),
      ),
      { maxLength: 40 },
    );
    fc.assert(
      fc.property(pieces, (chunks) => {
        const reader = new ResponseReader(256, false);
        let total = 0;
        for (const chunk of chunks) {
          reader.feed(chunk);
          total += chunk.length;
        }
        const pending = (reader as unknown as { pending?: Buffer }).pending;
        expect(pending?.length ?? 0).toBeLessThanOrEqual(Math.min(total, MAX_HEAD_BYTES));
        if (reader.state === FAILED) expect(reader.error).toEqual(expect.any(String));
        if (reader.head) expect(reader.head.status).toBeGreaterThanOrEqual(101);
      }),
      { numRuns: 500 },
    );
  });
});
