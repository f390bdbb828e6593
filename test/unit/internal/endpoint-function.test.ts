import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { RESPOND_TIMEOUT_RESPONSE } from "#core/http-run-event";
import { jsonLogger } from "#core/ports/logger";
import { ANSWER_MARGIN_MS, httpInterfaceHandler } from "#internal/endpoint-function";
import { scriptedSource } from "../../support/scripted-sources.ts";

const recorded = JSON.parse(
  readFileSync(new URL("../../fixtures/api-gateway/http-interface.json", import.meta.url), "utf8"),
);

/** The recorded catch-all event sent to `key`. */
const eventFor = (key: string) => ({
  ...recorded,
  rawPath: `/http/${key}/hooks/github`,
  pathParameters: { key, proxy: "hooks/github" },
});

describe("the endpoint function's request line (AWS)", () => {
  it("names the source reached and the status, never the key, the rest of the path or the query", async () => {
    const { deps, source, endpointKey } = await scriptedSource(async () => ({}));
    const lines: Record<string, unknown>[] = [];
    deps.log = jsonLogger({}, (line) => lines.push(JSON.parse(line)));
    const handler = httpInterfaceHandler(async () => deps);

    const result = await handler(eventFor(endpointKey), { awsRequestId: "req-1" });
    expect(result.statusCode).toBe(200);
    const unknown = await handler(eventFor("unknownkey123"), { awsRequestId: "req-2" });
    expect(unknown.statusCode).toBe(404);

    const requests = lines.filter((line) => line.message === "request");
    expect(requests).toEqual([
      expect.objectContaining({
        method: "POST",
        path: "/http/{key}",
        status: 200,
        request_id: "req-1",
        source_id: source.id,
        duration_ms: expect.any(Number),
      }),
      expect.objectContaining({ method: "POST", path: "/http/{key}", status: 404, request_id: "req-2" }),
    ]);
    expect(requests[1]).not.toHaveProperty("source_id");
    const logged = JSON.stringify(lines);
    for (const hidden of [endpointKey, "unknownkey123", "hooks/github", "a=1"]) expect(logged).not.toContain(hidden);
  });
});

describe("the endpoint function's custom responses (AWS)", () => {
  it("ends the run before the function's own time is up, so a run that times out gets its answer and its events", async () => {
    const { deps, calls, endpointKey, channel } = await scriptedSource(
      async (invocation) => ({
        emits: [{ event: { seen: true }, meta: {} }],
        error: { name: "TimeoutError", message: `timed out after ${invocation.timeoutMs} ms`, ts: 0 },
      }),
      { customResponse: true },
    );
    const handler = httpInterfaceHandler(async () => deps);
    // 4 s left: the run gets what remains but the margin to store and answer.
    const result = await handler(eventFor(endpointKey), {
      awsRequestId: "req-1",
      getRemainingTimeInMillis: () => 4_000,
    });
    expect(calls.at(-1)?.timeoutMs).toBe(4_000 - ANSWER_MARGIN_MS);
    expect(result.statusCode).toBe(RESPOND_TIMEOUT_RESPONSE.status);
    expect((await channel("")).map((stored) => stored.event)).toEqual([{ seen: true }]);

    // Plenty of time left: the run's own limit (5 s in these deps) stands.
    await handler(eventFor(endpointKey), { awsRequestId: "req-2", getRemainingTimeInMillis: () => 60_000 });
    expect(calls.at(-1)?.timeoutMs).toBe(deps.runtime.invocationTimeoutMs);
  });
});
