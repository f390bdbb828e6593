import { describe, expect, it } from "vitest";
import type { NewEvent } from "#core/component-model";
import { jsonLogger } from "#core/ports/logger";
import { MAX_EMIT_BYTES, MAX_EMIT_ID_LENGTH, MAX_ERROR_TEXT } from "#core/run-limits";
import { receiveHttpRequest } from "#core/source-endpoint";
import { MAX_LOG_LINES_PER_RUN, runSource } from "#core/source-runs";
import { usageDay } from "#core/time";
import { RESPONSE_MAX_BODY_BYTES, RESPONSE_MAX_HEADERS } from "#runtime/http-response";
import type { EmitRecord, InvocationResult, LogRecord } from "#runtime/protocol";
import { DB_MAX_BYTES, LOG_MAX_BYTES } from "#runtime/result-limits";
import { endpointRequest, scriptedSource } from "../../support/scripted-sources.ts";

/**
 * Item 5 of issue 12: every limit on what a run returns is checked by the trusted side. The
 * scripted host hands over results no runtime would make (what a child that writes its own result
 * frame sends), and the real use cases apply them: nothing over a limit is stored, and each cut is
 * told on the source's `$errors`.
 */

type Forged = Partial<InvocationResult>;

/** A source whose every run returns `forged`, and the applied outcome of one queued run of it. */
async function runForged(forged: Forged | (() => Forged)) {
  const setup = await scriptedSource(async () => (typeof forged === "function" ? forged() : forged));
  await runSource(setup.deps, { sourceId: setup.source.id, trigger: "http", event: { n: 1 } });
  const errors = (await setup.channel("$errors")).map(
    (event) => (event.event as { error: { code: string; message: string } }).error,
  );
  return { ...setup, errors };
}

const emits = (count: number, event: (n: number) => unknown = (n) => ({ n })): EmitRecord[] =>
  Array.from({ length: count }, (_, n) => ({ event: event(n) as EmitRecord["event"], meta: {} }));

describe("the trusted side checks what a run returns", () => {
  it("saves none of a run's $.service.db writes that would grow the store past its limit, and says why", async () => {
    let call = 0;
    const { deps, source, errors, channel } = await runForged(
      (): Forged =>
        ++call === 1
          ? { dbWrites: { kept: 1 } }
          : { dbWrites: { big: "x".repeat(DB_MAX_BYTES * 4), small: 2 }, emits: emits(1) },
    );
    expect(errors).toEqual([]);
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    const state = await deps.sources.getSourceState(source.id);
    // All or nothing: not even the small key of the forged run.
    expect(state.db).toEqual({ kept: 1 });
    const after = (await channel("$errors")).map(
      (event) => (event.event as { error: { code: string; message: string } }).error,
    );
    expect(after).toEqual([
      expect.objectContaining({ code: "ServiceDbLimitError", message: expect.stringContaining(String(DB_MAX_BYTES)) }),
    ]);
    // The run's other effects are applied.
    expect((await channel("")).map((event) => event.event)).toEqual([{ n: 0 }]);
  });

  it("stores nothing of a run that failed because its source was deleted meanwhile", async () => {
    const { deps, source, channel } = await scriptedSource(async () => ({
      emits: emits(1),
      error: { name: "SandboxError", message: "the source was removed", ts: 1 },
    }));
    deps.host = { ...deps.host, wasRemoved: (id) => id === source.id };
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    expect(await channel("")).toEqual([]);
    expect(await channel("$errors")).toEqual([]);
  });

  it("stores the first emits a run may make and refuses the rest with one $errors event", async () => {
    const { deps, source, channel } = await scriptedSource(async () => ({ emits: emits(5_000) }));
    deps.runtime.emitLimits = { maxEmits: 10, maxEmitBytes: 8 * 1024 * 1024 };
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    expect((await channel("")).map((event) => event.event)).toEqual(emits(10).map((emit) => emit.event));
    const errors = await channel("$errors");
    expect(errors).toHaveLength(1);
    expect(errors[0]?.event).toMatchObject({
      error: { code: "EmitLimitError", message: expect.stringMatching(/more than 10 events.*first 10 were stored/) },
    });
  });

  it("hands the store each kept emit's JSON as the check measured it, so it is serialised once", async () => {
    const kept = [
      { event: { n: 1, text: "é" }, meta: {} },
      { event: null, meta: { name: "other" } },
    ];
    const { deps, source, channel } = await scriptedSource(async () => ({ emits: kept }));
    const appended: NewEvent[][] = [];
    const append = deps.events.appendEvents.bind(deps.events);
    deps.events.appendEvents = (sourceId, events, nowMs) => {
      appended.push(events);
      return append(sourceId, events, nowMs);
    };
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    expect(appended.flat().map((event) => [event.channel, event.eventJson])).toEqual([
      ["", '{"n":1,"text":"é"}'],
      ["other", "null"],
    ]);
    expect((await channel("")).map((event) => event.event)).toEqual([{ n: 1, text: "é" }]);
  });

  it("stops at the emit that passes the run's bytes", async () => {
    const { deps, source, channel } = await scriptedSource(async () => ({
      emits: emits(10, (n) => ({ n, pad: "y".repeat(100 * 1024) })),
    }));
    deps.runtime.emitLimits = { maxEmits: 1_000, maxEmitBytes: 256 * 1024 };
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    expect((await channel("")).map((event) => (event.event as { n: number }).n)).toEqual([0, 1]);
    expect((await channel("$errors"))[0]?.event).toMatchObject({
      error: { code: "EmitLimitError", message: expect.stringContaining(`more than ${256 * 1024} bytes`) },
    });
  });

  it("refuses each emit that is too large or has bad options on its own, and stores the others", async () => {
    const { errors, channel } = await runForged({
      emits: [
        { event: { ok: 1 }, meta: {} },
        { event: { big: "z".repeat(MAX_EMIT_BYTES) }, meta: {} },
        { event: { ok: 2 }, meta: { id: "i".repeat(MAX_EMIT_ID_LENGTH + 1) } },
        { event: { ok: 3 }, meta: { name: "line\nbreak" } },
        { event: { ok: 4 }, meta: { summary: "s".repeat(64 * 1024) } },
        { event: { ok: 5 }, meta: { name: "custom" } },
        // Sluice's own channels, and a name with a bidirectional control character.
        { event: { fake: "error" }, meta: { name: "$errors" } },
        { event: { fake: "log" }, meta: { name: "$logs" } },
        { event: { fake: "pending" }, meta: { name: "$in" } },
        { event: { ok: 6 }, meta: { name: "a\u202Eb" } },
      ],
    });
    expect((await channel("")).map((event) => event.event)).toEqual([{ ok: 1 }]);
    expect((await channel("custom")).map((event) => event.event)).toEqual([{ ok: 5 }]);
    expect(await channel("$logs")).toEqual([]);
    expect(await channel("$in")).toEqual([]);
    expect(errors).toEqual([
      expect.objectContaining({ code: "EmitLimitError", message: expect.stringContaining("8 events were not stored") }),
    ]);
  });

  it("writes one line to the server's log for a run's refused emits, however many", async () => {
    const { deps, source, channel } = await scriptedSource(async () => ({ emits: emits(500) }), {
      description: { dedupe: "unique" },
    });
    const lines: Record<string, unknown>[] = [];
    deps.log = jsonLogger({}, (line) => lines.push(JSON.parse(line)));
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    // Without ids, a "unique" source's emits are refused: each is told on $logs, once in the server's log.
    expect((await channel("$logs")).length).toBeGreaterThan(50);
    const refused = lines.filter((line) => line.message === "source emit refused");
    expect(refused).toEqual([expect.objectContaining({ source_id: source.id, refused: 500 })]);
  });

  it("cuts forged logs to the bytes and lines a run may log", async () => {
    const huge: LogRecord[] = Array.from({ length: 50 }, (_, n) => ({
      ts: n,
      level: "log",
      message: "l".repeat(LOG_MAX_BYTES / 10),
    }));
    const { channel } = await runForged({ logs: huge });
    const logs = (await channel("$logs")).map((event) => event.event as unknown as LogRecord);
    const bytes = logs.reduce((sum, log) => sum + Buffer.byteLength(log.message), 0);
    expect(bytes).toBeLessThanOrEqual(LOG_MAX_BYTES);
    expect(logs.at(-1)?.message).toMatch(/further logs were dropped/);

    const many: LogRecord[] = Array.from({ length: 10_000 }, (_, n) => ({ ts: n, level: "log", message: "x" }));
    const { channel: manyLines } = await runForged({ logs: many });
    expect(await manyLines("$logs")).toHaveLength(MAX_LOG_LINES_PER_RUN);
  });

  it("cuts a forged error's message and stack", async () => {
    const { errors } = await runForged({
      error: { name: "Error", message: "m".repeat(MAX_ERROR_TEXT * 10), stack: "s".repeat(MAX_ERROR_TEXT * 10), ts: 1 },
    });
    expect(errors).toHaveLength(1);
    expect(errors[0]?.message.length).toBeLessThan(MAX_ERROR_TEXT + 100);
  });

  it("counts a forged duration as what the run could have taken, in whole milliseconds", async () => {
    for (const durationMs of [Number.NaN, -5, 1e15, 12.2]) {
      const { deps, workspaceId } = await runForged({ durationMs });
      const used = await deps.usage.getUsage(workspaceId, usageDay(deps.clock.nowMs()));
      expect(Number.isInteger(used.computeTimeMs)).toBe(true);
      expect(used.computeTimeMs).toBeGreaterThanOrEqual(0);
      expect(used.computeTimeMs).toBeLessThanOrEqual(2 * deps.runtime.invocationTimeoutMs);
      expect(used.credits).toBeGreaterThanOrEqual(1);
    }
  });
});

describe("the trusted side checks a custom response", () => {
  async function respondWith(response: unknown) {
    const setup = await scriptedSource(
      async (_invocation, handlers) => {
        handlers?.onRespond?.(response as never);
        return { response: response as never };
      },
      { customResponse: true },
    );
    const answer = await receiveHttpRequest(setup.deps, setup.endpointKey, endpointRequest());
    return { ...setup, answer };
  }

  it("drops framing and hop-by-hop headers and headers Node would refuse, keeping the others", async () => {
    const { answer } = await respondWith({
      status: 200,
      headers: {
        "Transfer-Encoding": "chunked",
        "content-length": "5",
        "Content-Length": "7",
        Connection: "keep-alive",
        "Keep-Alive": "timeout=5",
        TE: "trailers",
        Trailer: "x",
        Upgrade: "websocket",
        "Proxy-Authenticate": "Basic",
        "x-split": "a\r\nInjected: yes",
        "bad name": "x",
        "x-kept": "yes",
      },
      body: "hello",
    });
    expect(answer).toEqual({ status: 200, headers: { "x-kept": "yes" }, body: "hello" });
  });

  it.each([
    [
      "more headers than allowed",
      { headers: Object.fromEntries(Array.from({ length: RESPONSE_MAX_HEADERS + 1 }, (_, n) => [`x-${n}`, "v"])) },
    ],
    ["a body over the limit", { body: "b".repeat(RESPONSE_MAX_BODY_BYTES + 1) }],
    ["headers over their total size", { headers: { "x-big": "h".repeat(20 * 1024) } }],
    ["a 1xx status", { status: 101 }],
  ])("answers 502 for a response with %s and says why on $errors", async (_what, forged) => {
    const { answer, channel } = await respondWith({ status: 200, headers: {}, body: "", ...forged });
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body)).toEqual({ error: expect.stringContaining("refused") });
    await expect
      .poll(async () =>
        (await channel("$errors")).map((event) => (event.event as { error: { code: string } }).error.code),
      )
      .toEqual(["ResponseError"]);
  });
});
