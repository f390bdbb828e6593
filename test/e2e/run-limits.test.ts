import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, deployHttpSource } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * Issue 12 items 4, 5 and 7 against `npm start` and real sandbox children:
 * - a component that sends a result of its own (a forged result line on the sandbox's message
 *   channel, fd 4, for its own invocation) gets no more stored than the limits allow. The forger
 *   learns its invocation id by hooking `JSON.parse`, which the runtime reads requests with; the
 *   test checks that the forged emits reached the trusted side;
 * - response headers that would frame the wire never reach it (raw socket, exact bytes);
 * - a workspace over its runs-per-minute quota gets 429 with a JSON body, and one `$errors` notice.
 */

const MAX_EMITS = 10;
const RUNS_PER_MINUTE = 40;

/**
 * Remembers the invocations the host sends this process (it sees the requests as the runtime
 * parses them). Asked with `forge`, it sends, before its real result, a result of its own for its
 * own invocation: 500 emits, 1 MB in `$.service.db`, a response with framing headers. Otherwise
 * it answers how large its stored `big` key is.
 */
const FORGER = `
import { writeSync } from "node:fs";
const seen = [];
const parse = JSON.parse;
JSON.parse = function (text, reviver) {
  const message = parse.call(this, text, reviver);
  const requests = message?.type === "invokes" ? message.requests : message?.type === "invoke" ? [message] : [];
  for (const request of requests) if (request?.invocation) seen.push(request.invocation);
  return message;
};
export default {
  name: "Forger",
  version: "1.0.0",
  props: { http: { type: "$.interface.http", customResponse: true }, db: "$.service.db" },
  async run(event) {
    if (!event.body?.forge) {
      this.http.respond({ status: 200, body: { big: JSON.stringify(this.db.get("big") ?? null).length } });
      return;
    }
    const mine = seen.filter((invocation) => invocation.sourceId === process.env.PD_COMPONENT).at(-1);
    const send = (message) => writeSync(4, JSON.stringify(message) + "\\n");
    send({
      type: "result",
      result: {
        invocationId: mine.invocationId,
        emits: Array.from({ length: 500 }, (_, n) => ({ event: { forged: n }, meta: {} })),
        dbWrites: { big: "x".repeat(1_000_000) },
        logs: [],
        durationMs: 0,
        response: {
          status: 200,
          headers: { "transfer-encoding": "chunked", "content-length": "1", "x-forged": "yes" },
          body: "forged answer",
        },
      },
    });
    // The real result comes after the forged one, and is ignored.
    await new Promise((resolve) => setTimeout(resolve, 500));
  },
};
`;

/** Answers with the headers the request's body names: a real runtime in a real child. */
const HEADER_ECHO = `
export default {
  name: "Header echo",
  version: "1.0.0",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    this.http.respond({ status: 200, headers: event.body.headers, body: event.body.text });
  },
};
`;

const QUEUED = `
export default {
  name: "Queued",
  version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit(event.body);
  },
};
`;

describe("limits and quotas in local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice({
      env: { SLUICE_MAX_EMITS_PER_RUN: String(MAX_EMITS), SLUICE_RUNS_PER_MINUTE_QUOTA: String(RUNS_PER_MINUTE) },
    });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });

  afterAll(async () => {
    await sluice?.stop();
  });

  const deploy = (code: string) => deployHttpSource(api, code);

  const post = (endpoint: string, body: unknown) =>
    fetch(endpoint, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  async function events(sourceId: string, channel: string) {
    const page = await api("GET", `/sources/${sourceId}/event_summaries?event_name=${channel}&expand=event&limit=100`);
    return page.json.data as { event: any }[];
  }

  it("applies a forged result only within the limits, and says what it cut on $errors", async () => {
    const forger = await deploy(FORGER);
    // The first run loads the module, which then sees the invocations that follow.
    expect(await (await post(forger.endpoint, {})).json()).toEqual({ big: 4 });
    const forged = await post(forger.endpoint, { forge: true });
    // The forged response, its framing headers dropped.
    expect(forged.status).toBe(200);
    expect(forged.headers.get("x-forged")).toBe("yes");
    expect(await forged.text()).toBe("forged answer");

    const errors = await eventually(async () => {
      const found = await events(forger.id, "$errors");
      return found.length >= 2 ? found : undefined;
    }, "the $errors of the forged result");
    expect(errors.map((event) => event.event.error.code).sort()).toEqual(["EmitLimitError", "ServiceDbLimitError"]);
    // The forged result reached the trusted side (its emits are stored) but only the first ten.
    const stored = await events(forger.id, "default");
    expect(stored.map((event) => event.event.forged).sort((a, b) => a - b)).toEqual(
      Array.from({ length: MAX_EMITS }, (_, n) => n),
    );
    // Nothing of the 1 MB went into $.service.db.
    expect(await (await post(forger.endpoint, {})).json()).toEqual({ big: 4 });
  }, 60_000);

  it("puts on the wire one Content-Length of the server's, whatever framing headers the component sets", async () => {
    const echo = await deploy(HEADER_ECHO);
    const path = new URL(echo.endpoint).pathname;
    const request = (headers: Record<string, string>, text: string, close: boolean) => {
      const body = JSON.stringify({ headers, text });
      return `POST ${path} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${close ? "connection: close\r\n" : ""}\r\n${body}`;
    };
    const smuggled = "0\r\n\r\nHTTP/1.1 200 OK\r\nx-smuggled: 1\r\ncontent-length: 0\r\n\r\n";
    const wire = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(new URL(sluice.baseUrl).port), "127.0.0.1");
      const chunks: Buffer[] = [];
      socket.on("data", (chunk) => chunks.push(chunk));
      socket.on("error", reject);
      socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
      socket.write(
        request(
          { "Transfer-Encoding": "chunked", "Content-Length": "2", "content-length": "99", Connection: "keep-alive" },
          smuggled,
          false,
        ) + request({ "x-second": "1" }, "second", true),
      );
    });
    const firstHead = wire.slice(0, wire.indexOf("\r\n\r\n")).toLowerCase();
    expect(firstHead).not.toContain("transfer-encoding");
    expect(firstHead.match(/content-length: /g)).toHaveLength(1);
    expect(firstHead).toContain(`content-length: ${smuggled.length}`);
    // The smuggled text stayed inside the first body: what follows it is the second answer, whole.
    const afterFirst = wire.slice(wire.indexOf("\r\n\r\n") + 4 + smuggled.length);
    expect(afterFirst.startsWith("HTTP/1.1 200 ")).toBe(true);
    expect(afterFirst).toContain("x-second: 1");
    expect(afterFirst.endsWith("\r\n\r\nsecond")).toBe(true);
  }, 60_000);

  it("answers 429 with a JSON body past the runs-per-minute quota, runs nothing more, and notes it once", async () => {
    const queued = await deploy(QUEUED);
    // Enough to pass the quota even when the requests straddle two minutes.
    const answers = await Promise.all(
      Array.from({ length: 2 * RUNS_PER_MINUTE + 20 }, async (_, n) => {
        const response = await post(queued.endpoint, { n });
        return {
          status: response.status,
          retryAfter: response.headers.get("retry-after"),
          body: await response.json(),
        };
      }),
    );
    const refused = answers.filter((answer) => answer.status === 429);
    expect(refused.length).toBeGreaterThanOrEqual(20);
    expect(refused[0]?.body).toEqual({
      error: expect.stringContaining("runs this minute"),
      quota: "runs_per_minute",
      limit: RUNS_PER_MINUTE,
    });
    expect(Number(refused[0]?.retryAfter)).toBeGreaterThan(0);
    const accepted = answers.length - refused.length;
    await eventually(
      async () => ((await events(queued.id, "default")).length === accepted ? true : undefined),
      "the accepted runs' events",
    );
    // One notice per minute, not one per refused request.
    const notices = await events(queued.id, "$errors");
    expect(notices.length).toBeGreaterThanOrEqual(1);
    expect(notices.length).toBeLessThanOrEqual(2);
    expect(notices[0]?.event.error).toMatchObject({ code: "QuotaExceededError" });
  }, 60_000);
});
