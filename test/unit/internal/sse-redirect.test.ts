import { describe, expect, it } from "vitest";
import { sseRedirect } from "../../../functions/stream/sse-redirect.ts";

const event = (id: string, rawQueryString = "") => ({
  pathParameters: { id },
  rawQueryString,
  requestContext: { requestId: "api-req-1" } as never,
});

describe("GET /sources/{id}/sse on the HTTP API", () => {
  it("redirects with 307 to the same path and query on the stream URL", () => {
    const result = sseRedirect(
      event("dc_01kab00000abcdefghjkmn", "event_name=%24logs"),
      "https://abc.lambda-url.eu-west-1.on.aws/",
    );
    const location = "https://abc.lambda-url.eu-west-1.on.aws/sources/dc_01kab00000abcdefghjkmn/sse?event_name=%24logs";
    expect(result.statusCode).toBe(307);
    expect(result.headers).toMatchObject({ location, "x-request-id": "api-req-1", "cache-control": "no-store" });
    expect(JSON.parse(result.body)).toEqual({ location, message: expect.stringContaining("--location-trusted") });
  });

  it("keeps the id inside its path segment", () => {
    const result = sseRedirect(event("dc_x/../../v1"), "https://abc.lambda-url.eu-west-1.on.aws");
    expect(result.headers.location).toBe("https://abc.lambda-url.eu-west-1.on.aws/sources/dc_x%2F..%2F..%2Fv1/sse");
  });
});
