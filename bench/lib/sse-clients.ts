/**
 * A child process holding many live-stream (SSE) clients on one source, for the stream scenario.
 *
 *   node --import tsx bench/lib/sse-clients.ts <stream url> <api key> <clients>
 *
 * Prints `connected <ok> failed <n>` once every client got its answer. Each message's arrival
 * time (`monoMs()`, comparable across processes) is recorded per event `n` (the emitted body's
 * `n`). Asked over IPC with `{ type: "report" }`, it answers `{ type: "report", receipts, ... }`
 * where `receipts[n]` lists the arrival time at each client that got event `n`.
 */
import { request } from "node:http";
import { sseParser } from "../../test/support/sse-client.ts";
import { monoMs } from "./clock.ts";

const [url, apiKey, countText] = process.argv.slice(2);
if (!url || !apiKey || !countText) {
  process.stderr.write("usage: sse-clients.ts <stream url> <api key> <clients>\n");
  process.exit(2);
}
const count = Number(countText);
const EVENT_N = /"event":\{"n":(-?\d+)[,}]/;
const receipts: Record<number, number[]> = {};
const requests: ReturnType<typeof request>[] = [];
let ended = 0;
let malformed = 0;

function connect(): Promise<boolean> {
  return new Promise((resolve) => {
    // The bench's bodies are `{"n":<int>,...}`, so the envelope's `"event":{"n":<int>` finds `n`
    // without parsing every message as JSON: these processes share the 2 cores with the server.
    const parser = sseParser((message) => {
      const n = Number(EVENT_N.exec(message.data)?.[1]);
      if (!Number.isInteger(n)) malformed++;
      else {
        receipts[n] ??= [];
        receipts[n].push(arrivedAt);
      }
    });
    let arrivedAt = 0;
    const req = request(url as string, { headers: { authorization: `Bearer ${apiKey}` }, agent: false }, (response) => {
      if (response.statusCode !== 200) {
        response.resume();
        return resolve(false);
      }
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        arrivedAt = monoMs();
        parser.feed(chunk);
      });
      response.on("close", () => ended++);
      resolve(true);
    });
    req.on("error", () => resolve(false));
    req.end();
    requests.push(req);
  });
}

let ok = 0;
let failed = 0;
let next = 0;
// A bounded number of connection attempts at once, so the server's accept queue never overflows.
await Promise.all(
  Array.from({ length: Math.min(50, count) }, async () => {
    while (next < count) {
      next++;
      if (await connect()) ok++;
      else failed++;
    }
  }),
);
process.stdout.write(`connected ${ok} failed ${failed}\n`);

process.on("message", (message: { type?: string }) => {
  if (message?.type === "progress") {
    let received = 0;
    for (const [n, times] of Object.entries(receipts)) if (Number(n) >= 0) received += times.length;
    process.send?.({ type: "progress", received });
  } else if (message?.type === "report") {
    process.send?.({ type: "report", receipts, ended, malformed, connected: ok });
  }
});
const stop = () => {
  for (const req of requests) req.destroy();
  process.exit(0);
};
process.once("SIGTERM", stop);
process.once("disconnect", stop);
