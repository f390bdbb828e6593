import { describe, expect, it } from "vitest";
import type { Logger } from "#core/ports/logger";
import { ENDPOINT_LOG_PATH, logRequest } from "#http/request-log";

function infoLines() {
  const lines: Record<string, unknown>[] = [];
  const log: Logger = {
    debug() {},
    info: (message, fields) => lines.push({ message, ...fields }),
    warn() {},
    error() {},
    child: () => log,
  };
  return { log, lines };
}

describe("logRequest", () => {
  const line = { method: "POST", path: ENDPOINT_LOG_PATH, status: 200, durationMs: 3.26, requestId: "r-1" };

  it("names a source's endpoint request by source_id and a workflow trigger's by workflow_id", () => {
    const { log, lines } = infoLines();
    logRequest(log, { ...line, sourceId: "dc_abc" });
    logRequest(log, { ...line, sourceId: "p_abc" });
    expect(lines[0]).toMatchObject({
      message: "request",
      source_id: "dc_abc",
      workflow_id: undefined,
      duration_ms: 3.3,
    });
    expect(lines[1]).toMatchObject({ message: "request", source_id: undefined, workflow_id: "p_abc" });
  });

  it("names neither for an API request", () => {
    const { log, lines } = infoLines();
    logRequest(log, { ...line, path: "/v1/users/me", method: "GET" });
    expect(lines[0]).toMatchObject({ path: "/v1/users/me", source_id: undefined, workflow_id: undefined });
  });
});
