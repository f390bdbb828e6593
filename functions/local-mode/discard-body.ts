import type { Readable } from "node:stream";

/**
 * After an answer given before the request was read to its end (a 413, a request Node's parser
 * refused, a refused file URL), the rest of what the client sends is read and thrown away so the
 * client can read the answer (closing at once would reset its upload), but only up to this many bytes.
 */
export const MAX_DISCARDED_BYTES = 8 * 1024 * 1024;

/** Reads and drops what still arrives on `input`, destroying it past {@link MAX_DISCARDED_BYTES}. */
export function discardRest(input: Readable): void {
  let discarded = 0;
  input.on("data", (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > MAX_DISCARDED_BYTES) input.destroy();
  });
}
