import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { httpInterfaceEventSchema, toApiGatewayResult, toIncomingHttpRequest } from "#internal/api-gateway-http";

const recorded = JSON.parse(
  readFileSync(new URL("../../fixtures/api-gateway/http-interface.json", import.meta.url), "utf8"),
);

describe("toIncomingHttpRequest", () => {
  it("turns a recorded catch-all event into the endpoint key and the request below it", () => {
    const { endpointKey, request } = toIncomingHttpRequest(httpInterfaceEventSchema.parse(recorded));
    expect(endpointKey).toBe("k8f3j2h1g0a9");
    expect(request).toMatchObject({
      method: "POST",
      path: "/hooks/github",
      rawQuery: "a=1&a=2&b=%C3%A9",
      clientIp: "203.0.113.10",
      url: "https://abcd1234.execute-api.eu-west-1.amazonaws.com/http/k8f3j2h1g0a9/hooks/github?a=1&a=2&b=%C3%A9",
    });
    // The base64 body is decoded to its bytes.
    expect([...request.body]).toEqual([0, 1, 2, 255, 120, 89, 90]);
    expect(request.headers).toMatchObject({ "content-type": "application/octet-stream", "x-custom": "one,two" });
    // Payload format 2.0 moves cookies out of the headers; they come back as one cookie header.
    expect(request.headers.cookie).toBe("session=abc; theme=dark");
  });

  it("gives the endpoint's own path as / and reads a plain text body as UTF-8", () => {
    const event = httpInterfaceEventSchema.parse({
      ...recorded,
      rawPath: "/http/k8f3j2h1g0a9",
      rawQueryString: "",
      cookies: undefined,
      pathParameters: { key: "k8f3j2h1g0a9" },
      body: '{"ok":"é"}',
      isBase64Encoded: false,
    });
    const { request } = toIncomingHttpRequest(event);
    expect(request.path).toBe("/");
    expect(request.url).toBe("https://abcd1234.execute-api.eu-west-1.amazonaws.com/http/k8f3j2h1g0a9");
    expect(request.body.toString("utf8")).toBe('{"ok":"é"}');
    expect(request.headers.cookie).toBeUndefined();
  });

  it("reads an event without a body as an empty body", () => {
    const { body, isBase64Encoded, ...rest } = recorded;
    const { request } = toIncomingHttpRequest(
      httpInterfaceEventSchema.parse({ ...rest, rawPath: "/http/k8f3j2h1g0a9/" }),
    );
    expect(request.body.length).toBe(0);
    expect(request.path).toBe("/");
  });

  it("refuses an event without the endpoint key", () => {
    expect(httpInterfaceEventSchema.safeParse({ ...recorded, pathParameters: {} }).success).toBe(false);
  });
});

describe("toApiGatewayResult", () => {
  it("passes status, headers and a text body through", () => {
    expect(toApiGatewayResult({ status: 201, headers: { "content-type": "text/plain" }, body: "made" })).toEqual({
      statusCode: 201,
      headers: { "content-type": "text/plain" },
      body: "made",
      isBase64Encoded: false,
    });
  });

  it("marks a base64 body and moves set-cookie to cookies", () => {
    expect(
      toApiGatewayResult({
        status: 200,
        headers: { "Set-Cookie": "a=1; Path=/", "content-type": "image/png" },
        body: "iVBORw0KGgo=",
        bodyEncoding: "base64",
      }),
    ).toEqual({
      statusCode: 200,
      headers: { "content-type": "image/png" },
      cookies: ["a=1; Path=/"],
      body: "iVBORw0KGgo=",
      isBase64Encoded: true,
    });
  });

  it("gives each cookie of a response its own entry in cookies, and drops one a function forged with a line break", () => {
    expect(
      toApiGatewayResult({
        status: 200,
        headers: { "content-type": "text/plain" },
        cookies: ["a=1; Expires=Wed, 21 Oct 2026 07:28:00 GMT", "b=2", "c=3\r\nx-injected: 1"],
        body: "ok",
      }),
    ).toEqual({
      statusCode: 200,
      headers: { "content-type": "text/plain" },
      cookies: ["a=1; Expires=Wed, 21 Oct 2026 07:28:00 GMT", "b=2"],
      body: "ok",
      isBase64Encoded: false,
    });
  });

  it("drops framing and hop-by-hop headers a source function sent, and a 204's body: API Gateway frames the answer", () => {
    const forged = {
      status: 204,
      headers: {
        "Content-Length": "10",
        "transfer-encoding": "chunked",
        Connection: "close",
        "x-inject": "a\r\nx-evil: 1",
        "x-kept": "1",
      },
      body: "not empty",
    };
    expect(toApiGatewayResult(forged)).toEqual({
      statusCode: 204,
      headers: { "x-kept": "1" },
      body: "",
      isBase64Encoded: false,
    });
  });
});
