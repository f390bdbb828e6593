import { request } from "node:http";

/** One SSE message as an EventSource would dispatch it (`event` absent for the default type). */
export interface SseMessage {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

export interface RawStream {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Everything received so far, as text. */
  text(): string;
  messages: SseMessage[];
  /** Comment lines, without the leading colon. */
  comments: string[];
  /** `retry:` values received. */
  retries: number[];
  /** True once the server ended the response or the connection closed. */
  ended(): boolean;
  close(): void;
}

/**
 * Parses an event stream incrementally, the way the WHATWG algorithm does for what Sluice sends
 * (`id`, `event`, `data`, `retry` fields and comment lines; messages end at a blank line).
 */
export function sseParser(onMessage: (message: SseMessage) => void, onComment: (text: string) => void = () => {}) {
  let buffer = "";
  const retries: number[] = [];
  return {
    retries,
    feed(chunk: string) {
      buffer += chunk;
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const message: SseMessage = { id: undefined, event: undefined, data: "" };
        let hasData = false;
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) {
            onComment(line.slice(1));
            continue;
          }
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "id") message.id = value;
          else if (field === "event") message.event = value;
          else if (field === "retry") retries.push(Number(value));
          else if (field === "data") {
            message.data = hasData ? `${message.data}\n${value}` : value;
            hasData = true;
          }
        }
        if (hasData) onMessage(message);
      }
    },
  };
}

/** Opens a stream with node:http and resolves once the status line and headers arrived. */
export function openRawStream(url: string, headers: Record<string, string> = {}, method = "GET"): Promise<RawStream> {
  return new Promise((resolve, reject) => {
    const messages: SseMessage[] = [];
    const comments: string[] = [];
    let text = "";
    let ended = false;
    const parser = sseParser(
      (message) => messages.push(message),
      (comment) => comments.push(comment),
    );
    const req = request(url, { method, headers, agent: false }, (response) => {
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        text += chunk;
        parser.feed(chunk);
      });
      response.on("end", () => (ended = true));
      response.on("close", () => (ended = true));
      response.on("error", () => (ended = true));
      resolve({
        status: response.statusCode ?? 0,
        headers: response.headers,
        text: () => text,
        messages,
        comments,
        retries: parser.retries,
        ended: () => ended,
        close: () => req.destroy(),
      });
    });
    req.on("error", (error) => {
      ended = true;
      reject(error);
    });
    req.end();
  });
}

/** The parsed `data:` of each message (Sluice sends one line of JSON). */
export const dataOf = (messages: readonly SseMessage[]): any[] => messages.map((message) => JSON.parse(message.data));
