/**
 * `npx tsx bench/threaded-send-cost.ts [label] [rounds]`: the CPU of one delivery's request as local
 * mode makes it, through `ThreadedWebhookSender` (main thread and sending thread: the whole
 * process, `process.cpuUsage()`), to a receiver in another process. Each round sends 2,500 POSTs
 * paced at 500/s, then 10,000 with 16 in flight. Prints µs per POST with the load average. It
 * imports only what existed before decision 478, so the same file runs on older checkouts too.
 */
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { ThreadedWebhookSender } from "#adapters/local/threaded-webhook-sender";
import { silentLogger } from "#core/ports/logger";
import type { WebhookSendResult } from "#core/ports/webhook-sender";

const [label = "?", rounds = "3"] = process.argv.slice(2);
const BODY = JSON.stringify({ id: "evt_01jd0000000000000000000000", e: { n: 1, text: "hello" }, ts: 1 });
const HEADERS = {
  "content-type": "application/json",
  "user-agent": "Sluice-Webhooks/1",
  "x-sluice-signature": `t=1,v1=${"a".repeat(64)}`,
};
const child = spawn(
  process.execPath,
  [
    "-e",
    `const s = require("node:http").createServer((q, r) => { let b = ""; q.on("data", (c) => (b += c)); q.on("end", () => { JSON.parse(b); r.writeHead(200, { "content-type": "application/json" }); r.end('{"ok":true}'); }); }); s.keepAliveTimeout = 60000; s.listen(0, "127.0.0.1", () => process.send(s.address().port));`,
  ],
  { stdio: ["ignore", "inherit", "inherit", "ipc"] },
);
const port = await new Promise<number>((resolve) => child.once("message", (m) => resolve(m as number)));
const url = `http://127.0.0.1:${port}/hook`;
const sender = new ThreadedWebhookSender({
  allowPrivateAddresses: true,
  workDir: mkdtempSync(join(tmpdir(), "tcost-")),
  log: silentLogger,
});
const check = (r: WebhookSendResult) => {
  if (!("status" in r) || r.status !== 200) throw new Error(JSON.stringify(r));
};
async function paced(rate: number, count: number) {
  const before = process.cpuUsage();
  const start = performance.now();
  const sent: Promise<unknown>[] = [];
  for (let n = 0; n < count; n++) {
    const wait = start + (n * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    sent.push(sender.post(url, HEADERS, BODY, 5000).then(check));
  }
  await Promise.all(sent);
  const u = process.cpuUsage(before);
  return (u.user + u.system) / count;
}
async function burst(c: number, count: number) {
  const before = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (next++ < count) check(await sender.post(url, HEADERS, BODY, 5000));
    }),
  );
  const u = process.cpuUsage(before);
  return (u.user + u.system) / count;
}
await paced(500, 2000);
const out: string[] = [];
for (let r = 0; r < Number(rounds); r++) {
  out.push(`500/s ${(await paced(500, 2500)).toFixed(0)} µs`);
  out.push(`c=16 ${(await burst(16, 10000)).toFixed(0)} µs`);
}
console.log(`${label}: ${out.join(", ")}; load ${loadavg()[0]?.toFixed(2)}`);
await sender.close();
child.kill();
