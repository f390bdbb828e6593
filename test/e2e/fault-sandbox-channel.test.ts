import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createHttpWorkflow } from "../support/api-client.ts";
import { askDoubler, HEALTHY_SOURCE, keepRequesting } from "../support/doubler-traffic.ts";
import { eventually, when } from "../support/eventually.ts";
import { runSluice, type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * Issue 12's fault test "a component writes to its sandbox's channels", against `npm start`.
 * Component code runs in a sandbox child that talks to the server over two pipes (fd 3 and 4);
 * the code can write anything to them. Tenant one's healthy source answers requests throughout,
 * while tenant two's sources write garbage, partial, unfinished, huge, malformed and forged
 * messages (from a run, from a timer run every second, and from top-level code while the
 * component is described).
 * The server stays up, each bad run is recorded on its own `$errors` channel, a forged result for
 * an invocation that is not in flight changes nothing, and every healthy request gets its answer.
 * Issue 14: a workflow step writes forged results (naming another run, another workflow) and a
 * malformed line while another workflow's run is in flight.
 */

/** Longer than the 3 s after which an unfinished message kills its child, so the two are told apart. */
const TIMEOUT_MS = 10_000;

/** A source whose run does `write` and stays a moment (the server reads its two pipes apart). */
const writer = (name: string, write: string, extra = "") => `
import { writeSync } from "node:fs";
export default {
  name: "${name}",
  version: "1.0.0",
  props: { http: "$.interface.http"${extra} },
  async run() {
    ${write};
    await new Promise((resolve) => setTimeout(resolve, 300));
  },
};
`;

/** A custom-response source that learns its run's invocation id, then says `started` for it without end. */
const REPEATER = `
import { writeSync } from "node:fs";
export default {
  name: "Repeater",
  version: "1.0.0",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run() {
    const from = Buffer.from;
    let id;
    Buffer.from = function (value, ...rest) {
      const found = typeof value === "string" && /"invocationId":"([^"]+)"/.exec(value);
      if (found && id === undefined) id = found[1];
      return from.call(this, value, ...rest);
    };
    this.http.respond({ status: 200, body: "ok" });
    await new Promise((resolve) => setTimeout(resolve, 50));
    Buffer.from = from;
    const lines = (JSON.stringify({ type: "started", invocationId: id }) + "\\n").repeat(2000);
    for (let i = 0; i < 100; i++) writeSync(4, lines);
    await new Promise((resolve) => setTimeout(resolve, 300));
  },
};
`;

/** A source whose run makes data store calls far past the 20,000 one run may make, without awaiting them. */
const DATA_STORE_FLOODER = `
export default {
  name: "Data store flooder",
  version: "1.0.0",
  props: { http: "$.interface.http", dataStore: { type: "data_store" } },
  async run() {
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < 1000; i++) this.dataStore.get("k").catch(() => {});
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await new Promise((resolve) => setTimeout(resolve, 3000));
  },
};
`;

/** The bad writes, triggered one after another, with the `$errors` message each must leave. */
const BAD_WRITES = [
  // The report: fd 3 was Node's IPC channel, and this took the server down. It is now the
  // request pipe, which the child only reads.
  { name: "Request-pipe writer", write: 'writeSync(3, "not json\\n")', message: /request channel/ },
  { name: "Garbage", write: 'writeSync(4, "not json\\n")', message: /not JSON/ },
  { name: "Partial", write: 'writeSync(4, \'{"type":"res\')', message: /not JSON/ },
  { name: "Huge", write: 'writeSync(4, "x".repeat(17 * 1024 * 1024))', message: /longer than/ },
  { name: "Malformed", write: 'writeSync(4, \'{"type":"result","result":5}\\n\')', message: /malformed result/ },
  { name: "Unknown", write: 'writeSync(4, \'{"type":"shutdown"}\\n\')', message: /no known type/ },
  // Well-formed lines about nothing, as fast as it can: the server would parse them for ever.
  {
    name: "Chatter",
    write: 'const beats = \'{"type":"beat"}\\n\'.repeat(2000); for (let i = 0; i < 100; i++) writeSync(4, beats)',
    message: /over 1000 messages in a second that concern no run/,
  },
  // The same about its own run: `started` again and again, for the invocation id it read from the
  // runtime's own `respond` message (through a patched `Buffer.from`).
  {
    name: "Repeater",
    code: REPEATER,
    message: /over 1000 messages in a second that concern no run of its own or repeat/,
  },
  // `ready` is said once, at start: a repeat had every run in flight sent and run again, and
  // enough of them in one write took the server down (building one string of the repeats).
  { name: "Ready again", write: 'writeSync(4, \'{"type":"ready"}\\n\'.repeat(800))', message: /ready twice/ },
  // Only a describing process answers with a description.
  {
    name: "Described",
    write: 'writeSync(4, JSON.stringify({ type: "described", requestId: "x", ok: true }) + "\\n")',
    message: /description/,
  },
  // Data store calls past the 20,000 one run may make are refused at once: made without end, they are chatter.
  { name: "Data store flooder", code: DATA_STORE_FLOODER, message: /over 1000 messages in a second/ },
  // A line never finished: the loop keeps the runtime from writing anything after it.
  { name: "Unfinished", write: 'writeSync(4, \'{"type":"be\'); while (true) {}', message: /left a message unfinished/ },
] as const;

/** A valid result for an invocation that is in flight nowhere (taken for nothing), then a genuine emit. */
const FORGED_RESULT =
  'writeSync(4, JSON.stringify({ type: "result", result: { invocationId: "inv_forged", emits: [{ event: "forged" }] } }) + "\\n"); this.$emit("genuine")';

/** A workflow step writing the trigger body's `lines` to the result pipe, then emitting as its code would. */
const FORGER_STEP = `
import { writeSync } from "node:fs";
export default defineComponent({
  async run({ steps, $ }) {
    for (const line of steps.trigger.event.body.lines) writeSync(4, line);
    await new Promise((resolve) => setTimeout(resolve, 300));
    $.send.emit({ raw_event: { genuine: steps.trigger.event.body.n } });
  },
});
`;

/** A workflow step that takes a while, then answers the caller with the number it was sent. */
const VICTIM_STEP = `
export default defineComponent({
  async run({ steps, $ }) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await $.respond({ status: 200, body: { genuine: steps.trigger.event.body.n } });
  },
});
`;

describe("fault: a component writes to its sandbox's channels", () => {
  let sluice: SluiceProcess;
  let one: ReturnType<typeof apiClient>;
  let two: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice({
      env: { SLUICE_INVOCATION_TIMEOUT_MS: String(TIMEOUT_MS), SLUICE_SANDBOX_HEAP_MB: "64" },
    });
    one = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const { stdout } = await runSluice(["create-user", "--username", "tenant-two", "--email", "two@tenant.example"], {
      SLUICE_DATA_DIR: sluice.dataDir,
    });
    two = apiClient(sluice.baseUrl, JSON.parse(stdout).api_key);
  }, 60_000);

  afterAll(async () => {
    await sluice?.stop();
  });

  async function deploy(api: typeof one, code: string): Promise<{ id: string; endpoint: string }> {
    const answer = await api("POST", "/sources", { component_code: code });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    return { id: answer.json.data.id, endpoint: answer.json.data.configured_props.http.endpoint_url };
  }

  const errorsOf = async (id: string) =>
    (await two("GET", `/sources/${id}/event_summaries?event_name=$errors&expand=event`)).json.data as {
      event: { error: { code: string; message: string } };
    }[];

  it("kills only the child that wrote it, records the run's error, and the other tenant is answered throughout", async () => {
    const healthy = await deploy(one, HEALTHY_SOURCE);
    const bad = [];
    for (const each of BAD_WRITES) {
      const code = "code" in each ? each.code : writer(each.name, each.write);
      bad.push({ ...each, ...(await deploy(two, code)) });
    }
    const forger = await deploy(two, writer("Forger", FORGED_RESULT));
    const serverPid = sluice.child.pid;

    const traffic = keepRequesting(healthy.endpoint, 4);
    try {
      await eventually(() => when(traffic.answered >= 20), "the first healthy answers");
      const answeredBefore = traffic.answered;
      for (const each of bad) {
        expect((await fetch(each.endpoint, { method: "POST", body: "{}" })).status).toBe(200);
        const [recorded] = await eventually(
          async () => {
            const errors = await errorsOf(each.id);
            return errors.length > 0 ? errors : undefined;
          },
          `the $errors event of ${each.name}`,
          { timeoutMs: 20_000, intervalMs: 50 },
        );
        expect(recorded?.event.error.code, each.name).toBe("SandboxCrashError");
        expect(recorded?.event.error.message, each.name).toMatch(/broke the protocol with the host/);
        expect(recorded?.event.error.message, each.name).toMatch(each.message);
      }

      // A forged result for nothing in flight is ignored: the run ends as its code does.
      expect((await fetch(forger.endpoint, { method: "POST", body: "{}" })).status).toBe(200);
      const forgerEvents = await eventually(async () => {
        const page = await two("GET", `/sources/${forger.id}/event_summaries?expand=event`);
        return page.json.data.length > 0 ? page.json.data : undefined;
      }, "the forger's genuine event");
      expect(forgerEvents.map((each: { event: unknown }) => each.event)).toEqual(["genuine"]);
      // Healthy requests were answered while the bad ones ran, not only before and after.
      expect(traffic.answered - answeredBefore).toBeGreaterThan(20);
    } finally {
      await traffic.stop();
    }
    expect(traffic.wrong).toEqual([]);
    expect(await errorsOf(forger.id)).toEqual([]);

    // Each bad run failed once, and the server that answered them is the one that started.
    for (const each of bad) expect(await errorsOf(each.id), each.name).toHaveLength(1);
    expect([sluice.child.pid, sluice.child.exitCode]).toEqual([serverPid, null]);
    expect(await askDoubler(healthy.endpoint, 21)).toEqual({ n: 21, doubled: 42 });
  }, 120_000);

  it("answers 400 to a component whose top-level code writes to the channels while it is described", async () => {
    for (const [write, why] of [
      ['writeSync(3, "not json\\n")', /request channel/],
      ['writeSync(4, "not json\\n")', /not JSON/],
      [
        'writeSync(4, \'{"type":"described","requestId":"describe","ok":true,"description":{"props":5}}\\n\')',
        /malformed description/,
      ],
    ] as const) {
      const code = `import { writeSync } from "node:fs";\n${write};\nexport default { name: "Top", version: "1.0.0", props: {} };\n`;
      const answer = await two("POST", "/components", { component_code: code });
      expect(answer.status, write).toBe(400);
      expect(JSON.stringify(answer.json), write).toMatch(why);
    }
    expect(sluice.child.exitCode).toBeNull();
    expect((await one("GET", "/users/me")).status).toBe(200);
  }, 60_000);

  it("survives a timer source that writes garbage on every run", async () => {
    const ticking = await deploy(
      two,
      writer(
        "Ticker",
        'writeSync(3, "not json\\n")',
        ', timer: { type: "$.interface.timer", default: { intervalSeconds: 1 } }',
      ),
    );
    const errors = await eventually(
      async () => {
        const recorded = await errorsOf(ticking.id);
        return recorded.length >= 3 ? recorded : undefined;
      },
      "three failed timer runs",
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(errors.every((each) => each.event.error.code === "SandboxCrashError")).toBe(true);
    expect(sluice.child.exitCode).toBeNull();
    expect((await one("GET", "/users/me")).status).toBe(200);
    expect((await two("DELETE", `/sources/${ticking.id}`)).status).toBe(200);
  }, 60_000);

  it("ignores a workflow step's forged results for other runs and workflows, and kills its child on a malformed line", async () => {
    const forger = await createHttpWorkflow(two, "Forger", [{ namespace: "only", code: FORGER_STEP }], false);
    const victim = await createHttpWorkflow(two, "Victim", [{ namespace: "only", code: VICTIM_STEP }], true);
    const post = (url: string, body: unknown) =>
      fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const runsOf = async (id: string) =>
      (await two("GET", `/workflows/${id}/runs`)).json.data as {
        id: string;
        status: string;
        error: { code: string } | null;
      }[];
    const eventsOf = async (id: string, channel = "") =>
      (await two("GET", `/workflows/${id}/${channel}event_summaries?expand=event`)).json.data.map(
        (each: { event: unknown }) => each.event,
      );

    /** Starts a victim run and waits until it is in flight; its answer, and its run id. */
    const victimRun = async (n: number) => {
      const before = (await runsOf(victim.id)).length;
      const answer = post(victim.url, { n }).then(async (r) => ({ status: r.status, body: await r.json() }));
      const run = await eventually(async () => {
        const runs = await runsOf(victim.id);
        return runs.length > before && runs[0]?.status === "running" ? runs[0] : undefined;
      }, "the victim's run in flight");
      return { answer, runId: run.id };
    };

    // Forged results naming the victim's run in flight, the victim workflow and its step.
    const first = await victimRun(1);
    const forgedFor = (invocationId: string) =>
      `${JSON.stringify({
        type: "result",
        result: {
          invocationId,
          steps: [
            {
              id: victim.stepIds[0],
              status: "error",
              exportBytes: 0,
              dbWrites: {},
              durationMs: 1,
              error: { name: "Forged", message: "forged", ts: 1 },
            },
          ],
          sends: [{ type: "emit", raw_event: "forged" }],
          logs: [],
          response: { status: 418, headers: {}, body: "forged" },
          durationMs: 1,
        },
      })}\n`;
    const forged = [forgedFor(first.runId), forgedFor(victim.id), forgedFor(forger.id), forgedFor("inv_forged")];
    expect((await post(forger.url, { n: 1, lines: forged })).status).toBe(200);
    expect(await first.answer).toEqual({ status: 200, body: { genuine: 1 } });
    await eventually(async () => ((await eventsOf(forger.id)).length > 0 ? true : undefined), "the forger's emit");
    expect(await eventsOf(forger.id)).toEqual([{ raw_event: { genuine: 1 } }]);

    // A malformed line: the forger's child is killed and its run fails; the victim's run in flight does not.
    const second = await victimRun(2);
    expect((await post(forger.url, { n: 2, lines: ['{"type":"result","result":5}\n'] })).status).toBe(200);
    const [crash] = await eventually(async () => {
      const errors = await eventsOf(forger.id, "$errors/");
      return errors.length > 0 ? errors : undefined;
    }, "the forger's $errors event");
    expect(crash.error).toMatchObject({
      code: "SandboxCrashError",
      message: expect.stringMatching(/malformed result/),
    });
    expect(await second.answer).toEqual({ status: 200, body: { genuine: 2 } });

    // The forger's next run works; the victim's runs are its own, and nothing forged was stored.
    expect((await post(forger.url, { n: 3, lines: [] })).status).toBe(200);
    await eventually(
      async () => ((await eventsOf(forger.id)).length === 2 ? true : undefined),
      "the forger's next emit",
    );
    expect(await eventsOf(forger.id)).toEqual([{ raw_event: { genuine: 3 } }, { raw_event: { genuine: 1 } }]);
    expect((await runsOf(victim.id)).map((run) => [run.status, run.error])).toEqual([
      ["success", null],
      ["success", null],
    ]);
    expect(await eventsOf(victim.id)).toEqual([]);
    expect(await eventsOf(victim.id, "$errors/")).toEqual([]);
    expect(sluice.child.exitCode).toBeNull();
    expect((await one("GET", "/users/me")).status).toBe(200);
  }, 60_000);
});
