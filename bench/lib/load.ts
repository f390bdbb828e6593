import { monoMs, sleep } from "./clock.ts";
import { Connection, serializeRequest } from "./http1.ts";
import { RateSchedule } from "./rate.ts";
import { type LatencySummary, summarize } from "./stats.ts";

/**
 * A small bounded HTTP load generator: keep-alive connections (http1.ts), either a fixed number of requests in
 * flight (closed loop) or a fixed start rate (open loop), for a fixed duration, recording every
 * latency exactly.
 */
export interface LoadOptions {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  /** The path (and query) of request `index`, on the host of `url`; default the path of `url`. */
  path?: (index: number) => string;
  /** The body of request `index`, built right before it is sent. */
  body?: (index: number) => string | undefined;
  /** How long new requests are started. */
  durationMs: number;
  /**
   * Closed loop (no `ratePerSec`): exactly this many requests in flight. Open loop: at most this
   * many; a slot that finds them all busy waits (and is counted in `lateSlots`).
   */
  concurrency: number;
  /** Open loop: start requests at this rate per second, whatever the answers' latency. */
  ratePerSec?: number;
  /** Time limit of one request, and the grace given to those in flight at the end. @default 10_000 */
  timeoutMs?: number;
  /** Called with every answer (after its body was read). */
  onAnswer?: (index: number, status: number, body: Buffer) => void;
  /**
   * Stops starting requests once aborted, before `durationMs` has passed: for a load that lasts as
   * long as something else does. `durationMs` is then the longest it may run.
   */
  stop?: AbortSignal;
}

export interface LoadResult {
  mode: "concurrency" | "rate";
  concurrency: number;
  ratePerSec?: number;
  /** Requests started. */
  sent: number;
  /** Requests answered with 2xx. */
  ok: number;
  /** Answers by status code, plus `error` for network failures and `timeout`. */
  statuses: Record<string, number>;
  /** From the first request to the last answer (or the end of the grace period). */
  elapsedMs: number;
  /** 2xx answers per second over `elapsedMs`. */
  okPerSec: number;
  /**
   * Latency of every answered request in ms. Open loop: measured from the slot's due time, so
   * a server that stalls is charged for the requests it delayed (no coordinated omission).
   */
  latency: LatencySummary;
  /** Open loop: slots that started more than 5 ms late (every allowed socket was busy). */
  lateSlots: number;
  /** The first few network errors, for the report. */
  errors: string[];
}

const MAX_ERRORS_KEPT = 5;

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const method = options.method ?? "POST";
  const timeoutMs = options.timeoutMs ?? 10_000;
  const target = new URL(options.url);
  const host = target.hostname.replace(/^\[|\]$/g, "");
  const port = Number(target.port || 80);
  const path = `${target.pathname}${target.search}`;
  const headers: Record<string, string> = { ...options.headers };
  if (options.body && !Object.keys(headers).some((name) => name.toLowerCase() === "content-type")) {
    headers["content-type"] = "application/json";
  }
  const idle: Connection[] = [];
  const all: Connection[] = [];
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const errors: string[] = [];
  let sent = 0;
  let ok = 0;
  let lateSlots = 0;
  let lastAnswerAt = 0;
  const count = (key: string) => {
    statuses[key] = (statuses[key] ?? 0) + 1;
  };
  const connection = () => {
    const existing = idle.pop();
    if (existing) return existing;
    const made = new Connection(host, port, timeoutMs);
    all.push(made);
    return made;
  };

  /** One request on an idle connection; resolves when answered, failed or timed out (never rejects). */
  const fire = async (index: number, measuredFrom: number) => {
    const conn = connection();
    const request = serializeRequest(
      method,
      target.host,
      options.path?.(index) ?? path,
      headers,
      options.body?.(index),
    );
    sent++;
    try {
      const answer = await conn.send(request);
      const now = monoMs();
      lastAnswerAt = Math.max(lastAnswerAt, now);
      count(String(answer.status));
      latencies.push(now - measuredFrom);
      if (answer.status >= 200 && answer.status < 300) ok++;
      options.onAnswer?.(index, answer.status, answer.body);
    } catch (error) {
      lastAnswerAt = Math.max(lastAnswerAt, monoMs());
      const message = String(error);
      count(message.includes("timeout") ? "timeout" : "error");
      if (errors.length < MAX_ERRORS_KEPT) errors.push(message);
    } finally {
      idle.push(conn);
    }
  };

  const start = monoMs();
  let end = start + options.durationMs;
  const stopEarly = () => {
    end = Math.min(end, monoMs());
  };
  if (options.stop?.aborted) stopEarly();
  else options.stop?.addEventListener("abort", stopEarly, { once: true });
  const pending = new Set<Promise<void>>();
  const track = (promise: Promise<void>) => {
    pending.add(promise);
    promise.finally(() => pending.delete(promise));
    return promise;
  };

  if (options.ratePerSec === undefined) {
    const worker = async () => {
      while (monoMs() < end) await track(fire(sent, monoMs()));
    };
    await Promise.all(Array.from({ length: options.concurrency }, worker));
  } else {
    const schedule = new RateSchedule(
      options.ratePerSec,
      start,
      RateSchedule.slotsIn(options.ratePerSec, options.durationMs),
    );
    // Once stopped, the slots due until then still start (late, if every allowed socket is busy).
    const slots = () => (options.stop?.aborted ? Math.min(schedule.total, schedule.dueBy(end)) : schedule.total);
    let next = 0;
    while (next < slots()) {
      const now = monoMs();
      const due = Math.min(schedule.dueBy(now), slots());
      while (next < due && pending.size < options.concurrency) {
        const dueAt = schedule.dueAt(next);
        if (now - dueAt > 5) lateSlots++;
        track(fire(next, dueAt));
        next++;
      }
      if (next >= slots()) break;
      if (monoMs() > end + timeoutMs) break; // every connection stuck: give up on the remaining slots
      const wait = next < due ? 1 : Math.max(0, schedule.dueAt(next) - monoMs());
      await sleep(Math.min(wait, 50));
    }
  }
  options.stop?.removeEventListener("abort", stopEarly);
  // In-flight requests have their own time limit; nothing outlives this call.
  await Promise.race([Promise.all([...pending]), sleep(timeoutMs + 100)]);
  for (const conn of all) conn.close();
  const elapsedMs = Math.max(lastAnswerAt, end) - start;
  return {
    mode: options.ratePerSec === undefined ? "concurrency" : "rate",
    concurrency: options.concurrency,
    ...(options.ratePerSec === undefined ? {} : { ratePerSec: options.ratePerSec }),
    sent,
    ok,
    statuses,
    elapsedMs,
    okPerSec: elapsedMs > 0 ? (ok * 1000) / elapsedMs : 0,
    latency: summarize(latencies),
    lateSlots,
    errors,
  };
}
