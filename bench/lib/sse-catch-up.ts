/**
 * A child process that resumes one live stream (SSE) and reads its history, for the flood scenario:
 *
 *   node --import tsx bench/lib/sse-catch-up.ts <stream url> <api key> <last event id> <expected>
 *
 * Prints `connected <status>` once the answer's head arrived, then `done <received> <disorder>
 * <last id>` once `expected` messages arrived (or `ended <received> <disorder> <last id>` if the
 * stream ended first), and waits to be stopped. `disorder` counts messages whose id was not above
 * the one before (a repeat or a reordering); with `received` equal to the events stored after the
 * resume id, 0 means none was lost or repeated. A separate process, because reading hundreds of MB
 * would otherwise take the bench's own event loop from the load generator it measures with. Only
 * `id:` lines are looked at, with Buffer searches, so it costs the shared cores little.
 */
import { request } from "node:http";
import { compareEventIds } from "#core/event-ids";

const [url, apiKey, lastEventId, expectedText] = process.argv.slice(2);
if (!url || !apiKey || !lastEventId || !expectedText) {
  process.stderr.write("usage: sse-catch-up.ts <stream url> <api key> <last event id> <expected>\n");
  process.exit(2);
}
const expected = Number(expectedText);
const ID_LINE = Buffer.from("\nid: ");
const NEWLINE = 0x0a;

let received = 0;
let disorder = 0;
let lastId = lastEventId;
let reported = false;
/** The end of the previous chunk that may hold the start of an `id:` line. */
let tail: Buffer = Buffer.alloc(0);

function report(word: string) {
  if (reported) return;
  reported = true;
  process.stdout.write(`${word} ${received} ${disorder} ${lastId}\n`);
}

function scan(chunk: Buffer) {
  const buffer = tail.length > 0 ? Buffer.concat([tail, chunk]) : chunk;
  let at = buffer.indexOf(ID_LINE);
  let consumed = 0;
  while (at >= 0) {
    const start = at + ID_LINE.length;
    const end = buffer.indexOf(NEWLINE, start);
    if (end < 0) break;
    const id = buffer.toString("latin1", start, end);
    if (compareEventIds(id, lastId) <= 0) disorder++;
    lastId = id;
    received++;
    consumed = end;
    at = buffer.indexOf(ID_LINE, end);
  }
  // Keep what an `id:` line cut by the chunk's end may start with (from its newline on).
  const keepFrom = Math.max(consumed, buffer.length - 64);
  tail = Buffer.from(buffer.subarray(keepFrom));
  if (received >= expected) report("done");
}

const req = request(
  url,
  { headers: { authorization: `Bearer ${apiKey}`, "last-event-id": lastEventId }, agent: false },
  (response) => {
    process.stdout.write(`connected ${response.statusCode}\n`);
    response.on("data", scan);
    response.on("close", () => report("ended"));
  },
);
req.on("error", (error) => {
  process.stderr.write(`${String(error)}\n`);
  report("ended");
});
req.end();

const stop = () => {
  req.destroy();
  process.exit(0);
};
process.once("SIGTERM", stop);
process.stdin.on("end", stop);
process.stdin.resume();
