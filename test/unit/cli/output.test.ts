import { describe, expect, it } from "vitest";
import { logLine } from "../../../bin/cli/commands/events.ts";
import { printable } from "../../../bin/cli/output.ts";
import { type SseMessage, sseMessages } from "../../../bin/cli/sse.ts";

async function* chunks(...parts: string[]): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield new TextEncoder().encode(part);
}

async function collect(stream: AsyncIterable<SseMessage>): Promise<SseMessage[]> {
  const messages: SseMessage[] = [];
  for await (const message of stream) messages.push(message);
  return messages;
}

describe("text from a server, printed on a terminal", () => {
  it("shows control characters escaped, keeping new lines and tabs", () => {
    expect(printable("a\x1b[2J\x1b]0;owned\x07b\r\nc\td\x9b")).toBe("a\\x1b[2J\\x1b]0;owned\\x07b\\x0d\nc\td\\x9b");
    expect(printable("plain, accentué, 日本")).toBe("plain, accentué, 日本");
  });
});

describe("a log or error event as a line", () => {
  const at = Date.UTC(2026, 10, 26, 12, 0, 0);
  it("prints a console line with its level, and an error with its name, part and stack", () => {
    expect(
      logLine({
        id: "1-0",
        indexed_at_ms: at,
        event: { ts: at, level: "warn", message: "careful" },
        metadata: { emitter_id: "dc_x", emit_id: "e", name: "$logs" },
      }),
    ).toBe("2026-11-26T12:00:00Z  warn   careful");
    expect(
      logLine({
        id: "1-1",
        indexed_at_ms: at,
        event: {
          error: {
            code: "TypeError",
            message: "x is undefined",
            cellId: "run",
            stack: "TypeError: x\n    at run (a.mjs:3)",
          },
        },
        metadata: { emitter_id: "dc_x", emit_id: "e", name: "$errors" },
      }),
    ).toBe("2026-11-26T12:00:00Z  ERROR  TypeError: x is undefined (in run)\n    at run (a.mjs:3)");
  });
});

describe("reading a live stream", () => {
  it("parses messages split across chunks, with CRLF, comments, several data lines and no event line", async () => {
    const messages = await collect(
      sseMessages(
        chunks(
          "retry: 1000\n\n:ok\n\nid: 1-0\nev",
          'ent: ticks\ndata: {"a"',
          ":1}\n\n",
          "id: 1-1\r\ndata: x\r\ndata: y\r\n\r\n",
        ),
      ),
    );
    expect(messages).toEqual([
      { id: "1-0", event: "ticks", data: '{"a":1}' },
      { id: "1-1", event: undefined, data: "x\ny" },
    ]);
  });

  it("stops a server that sends a message without end", async () => {
    await expect(collect(sseMessages(chunks("data: ", "x".repeat(100), "y".repeat(100)), 150))).rejects.toThrow(
      "the live stream sent a message of more than 150 characters",
    );
  });
});
