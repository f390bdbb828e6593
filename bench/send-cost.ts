/**
 * `npx tsx bench/send-cost.ts [requests] [concurrencies] [clients]`: the CPU one kept-alive POST
 * costs the sending process (decision 478, docs/benchmarks.md "CPU per webhook POST"). A receiver
 * in another process (a bare node:http server that reads the body and answers 200 with a small
 * JSON body) takes small JSON POSTs from each client in turn: `node-http` (node:http with a
 * keep-alive agent, as the sender was before 478), `http1` (`Http1WebhookSender`, today's
 * sender) and, when `UNDICI` names an installed undici package's folder, `undici` (a `Pool` per
 * origin with the address guard's `lookup` in its `connect` options). Rounds alternate between
 * the clients so load on the machine falls on each alike. Prints µs of CPU (user + system, from
 * `process.cpuUsage()`) per POST, the median of the rounds, with the load average.
 */
import { spawn } from "node:child_process";
import { Agent, request } from "node:http";
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { guardedLookup } from "#adapters/address-guard";
import { Http1WebhookSender } from "#adapters/http1-webhook-sender";

const total = Number(process.argv[2] ?? 20_000);
/** `c` POSTs at a time, as fast as they go, or `N/s` paced (each POST on its own). */
const concurrencies = (process.argv[3] ?? "1,16,500/s").split(",");
const names = (process.argv[4] ?? "node-http,http1,undici").split(",");
const ROUNDS = 5;
const BODY = JSON.stringify({ id: "evt_01jd0000000000000000000000", e: { n: 1, text: "hello" }, ts: 1 });
const HEADERS = {
  "content-type": "application/json",
  "user-agent": "Sluice-Webhooks/1",
  "x-sluice-delivery-id": "dlv_01jd0000000000000000000000",
  "x-sluice-signature": `t=1,v1=${"a".repeat(64)}`,
};

type Post = (url: string) => Promise<number>;

function nodeHttpClient(): { post: Post; close: () => void } {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const post: Post = (url) =>
    new Promise((resolve, reject) => {
      const payload = Buffer.from(BODY);
      const req = request(
        new URL(url),
        { method: "POST", agent, headers: { ...HEADERS, "content-length": String(payload.length) } },
        (res) => {
          resolve(res.statusCode ?? 0);
          res.on("data", () => {});
        },
      );
      req.on("error", reject);
      req.end(payload);
    });
  return { post, close: () => agent.destroy() };
}

function http1Client(): { post: Post; close: () => void } {
  const sender = new Http1WebhookSender({ allowPrivateAddresses: true });
  const post: Post = async (url) => {
    const result = await sender.post(url, HEADERS, BODY, 5_000);
    if (!("status" in result)) throw new Error(result.error);
    return result.status;
  };
  return { post, close: () => sender.close() };
}

async function undiciClient(): Promise<{ post: Post; close: () => void }> {
  const folder = process.env.UNDICI;
  if (!folder) throw new Error("UNDICI is not set");
  const { Pool } = await import(`${folder}/index.js`);
  const pools = new Map<string, InstanceType<typeof Pool>>();
  const post: Post = async (url) => {
    const target = new URL(url);
    let pool = pools.get(target.origin);
    if (!pool) {
      // A host name would be resolved by the guard's lookup, as in `Http1WebhookSender`; an IP
      // literal (this receiver) calls no lookup, in any of the clients.
      pool = new Pool(target.origin, { connections: 64, connect: { lookup: guardedLookup } });
      pools.set(target.origin, pool);
    }
    const { statusCode, body } = await pool.request({
      path: `${target.pathname}${target.search}`,
      method: "POST",
      headers: HEADERS,
      body: BODY,
      headersTimeout: 5_000,
      bodyTimeout: 5_000,
      maxRedirections: 0,
    });
    await body.dump({ limit: 65_536 });
    return statusCode;
  };
  return { post, close: () => void Promise.all([...pools.values()].map((pool) => pool.close())) };
}

async function receiver(): Promise<{ url: string; stop: () => void }> {
  const child = spawn(
    process.execPath,
    [
      "-e",
      `const s = require("node:http").createServer((q, r) => { let b = ""; q.on("data", (c) => (b += c));
       q.on("end", () => { JSON.parse(b); r.writeHead(200, { "content-type": "application/json" }); r.end('{"ok":true}'); }); });
       s.keepAliveTimeout = 60000; s.listen(0, "127.0.0.1", () => process.send(s.address().port));`,
    ],
    { stdio: ["ignore", "inherit", "inherit", "ipc"] },
  );
  const port = await new Promise<number>((resolve) => child.once("message", (m) => resolve(m as number)));
  return { url: `http://127.0.0.1:${port}/hook`, stop: () => child.kill() };
}

/** `count` POSTs, `concurrency` at a time, or at `rate` per second when given (each on its own). */
async function run(post: Post, url: string, count: number, concurrency: number, rate?: number): Promise<number> {
  if (rate !== undefined) {
    const before = process.cpuUsage();
    const start = performance.now();
    const sent: Promise<number>[] = [];
    for (let n = 0; n < count; n++) {
      const due = start + (n * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      sent.push(post(url));
    }
    for (const status of await Promise.all(sent)) if (status !== 200) throw new Error(`status ${status}`);
    const used = process.cpuUsage(before);
    return (used.user + used.system) / count;
  }
  let next = 0;
  const lane = async () => {
    while (next++ < count) {
      const status = await post(url);
      if (status !== 200) throw new Error(`status ${status}`);
    }
  };
  const before = process.cpuUsage();
  await Promise.all(Array.from({ length: concurrency }, lane));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / count;
}

const target = await receiver();
const clients: Record<string, { post: Post; close: () => void }> = {};
for (const name of names) {
  if (name === "node-http") clients[name] = nodeHttpClient();
  else if (name === "http1") clients[name] = http1Client();
  else if (name === "undici" && process.env.UNDICI) clients[name] = await undiciClient();
}
const loadBefore = loadavg()[0] ?? 0;
console.log(`${total} POSTs per round (paced: 3 s), ${ROUNDS} rounds, load average ${loadBefore.toFixed(2)} at start`);
for (const spec of concurrencies) {
  const paced = spec.endsWith("/s");
  const rate = paced ? Number(spec.slice(0, -2)) : undefined;
  const concurrency = paced ? 1 : Number(spec);
  // Paced rounds are shorter: 3 s each at most.
  const count = rate === undefined ? total : Math.min(total, rate * 3);
  const samples: Record<string, number[]> = {};
  for (const client of Object.values(clients))
    await run(client.post, target.url, Math.min(2_000, count), concurrency, rate);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, client] of Object.entries(clients)) {
      const values = samples[name] ?? [];
      values.push(await run(client.post, target.url, count, concurrency, rate));
      samples[name] = values;
    }
  }
  const line = Object.entries(samples).map(([name, values]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return `${name} ${(sorted[Math.floor(sorted.length / 2)] as number).toFixed(0)} µs (${sorted.map((v) => v.toFixed(0)).join("/")})`;
  });
  console.log(`${paced ? spec : `c=${concurrency}`}: ${line.join("; ")}; load ${(loadavg()[0] ?? 0).toFixed(2)}`);
}
for (const client of Object.values(clients)) client.close();
target.stop();
