import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { afterEach, describe, expect, it, vi } from "vitest";
import { AWS_COMPUTE_ENV } from "#config/aws-compute-env";
import { sseRedirect } from "../../../functions/internal/sse-redirect.ts";

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

  it("redirects a workflow's stream, GET /workflows/{workflow_id}/sse, to its path on the stream URL", () => {
    const result = sseRedirect(
      {
        ...event(""),
        pathParameters: { workflow_id: "p_01kab00000abcdefghjkmn" },
        rawQueryString: "last_event_id=1-0",
      },
      "https://abc.lambda-url.eu-west-1.on.aws",
    );
    expect(result.statusCode).toBe(307);
    expect(result.headers.location).toBe(
      "https://abc.lambda-url.eu-west-1.on.aws/workflows/p_01kab00000abcdefghjkmn/sse?last_event_id=1-0",
    );
    const escaped = sseRedirect(
      { ...event(""), pathParameters: { workflow_id: "p_x/../../v1" } },
      "https://abc.lambda-url.eu-west-1.on.aws",
    );
    expect(escaped.headers.location).toBe("https://abc.lambda-url.eu-west-1.on.aws/workflows/p_x%2F..%2F..%2Fv1/sse");
  });

  it("keeps the id inside its path segment", () => {
    const result = sseRedirect(event("dc_x/../../v1"), "https://abc.lambda-url.eu-west-1.on.aws");
    expect(result.headers.location).toBe("https://abc.lambda-url.eu-west-1.on.aws/sources/dc_x%2F..%2F..%2Fv1/sse");
  });
});

describe("the redirect function's entry", () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.resetModules();
  });

  const entry = async () => (await import("../../../functions/internal/sse-redirect.ts")).handler;

  it("redirects to the stream URL the stack sets in its environment", async () => {
    vi.stubEnv(AWS_COMPUTE_ENV.streamUrl, "https://abc.lambda-url.eu-west-1.on.aws/");
    const result = await (await entry())(event("dc_01kab00000abcdefghjkmn") as unknown as APIGatewayProxyEventV2);
    expect(result.headers.location).toBe(
      "https://abc.lambda-url.eu-west-1.on.aws/sources/dc_01kab00000abcdefghjkmn/sse",
    );
  });

  it("fails, naming the variable, when the stream URL is not set", async () => {
    vi.stubEnv(AWS_COMPUTE_ENV.streamUrl, undefined);
    await expect((await entry())(event("dc_x") as unknown as APIGatewayProxyEventV2)).rejects.toThrow(
      AWS_COMPUTE_ENV.streamUrl,
    );
  });
});
