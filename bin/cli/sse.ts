import { CliError } from "./errors.ts";

/**
 * Longest message taken, in characters: an event is at most the run's emit budget (8 MiB by
 * default) and the stream's envelope carries it twice. A server that sends more without ending a
 * message is not followed into memory exhaustion.
 */
export const MAX_MESSAGE_CHARS = 32 * 1024 * 1024;

/** One message of a server-sent event stream: `event` is absent for the default type. */
export interface SseMessage {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

/**
 * Parses an event stream as it arrives (the WHATWG rules for what Sluice sends: `id`, `event`,
 * `data` fields, comments skipped, a message ends at a blank line, CRLF or LF).
 */
export async function* sseMessages(
  chunks: AsyncIterable<Uint8Array>,
  maxChars = MAX_MESSAGE_CHARS,
): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of chunks) {
    buffer += decoder.decode(chunk, { stream: true }).replace(/\r\n?/g, "\n");
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const message: SseMessage = { id: undefined, event: undefined, data: "" };
      let hasData = false;
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") message.id = value;
        else if (field === "event") message.event = value;
        else if (field === "data") {
          message.data = hasData ? `${message.data}\n${value}` : value;
          hasData = true;
        }
      }
      if (hasData) yield message;
    }
    if (buffer.length > maxChars)
      throw new CliError(`the live stream sent a message of more than ${maxChars} characters`);
  }
}
