import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { jsonLogger } from "#core/ports/logger";
import { httpInterfaceHandler } from "#internal/endpoint-function";
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
