import { describe, expect, it } from "vitest";
import { FLOW_PATH } from "#core/workflow-pauses";
import {
  buildOpenApiDocument,
  ENDPOINT_PATH,
  FLOW_URL_PATH,
  LIVE_STREAM_PATH,
  WORKFLOW_STREAM_PATH,
} from "#http/openapi-document";
import { ENDPOINT_LOG_PATH, FLOW_LOG_PATH } from "#http/request-log";
import { routes } from "#http/routes";

describe("OpenAPI document", () => {
  const document = buildOpenApiDocument();

  it("is OpenAPI 3.1 with the bearer scheme", () => {
    expect(document.openapi).toBe("3.1.0");
    expect(document.components?.securitySchemes?.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
  });

  it.each(routes.map((route) => [`${route.method} ${route.path}`, route] as const))("documents %s", (_, route) => {
    const operation = document.paths?.[route.path]?.[route.method.toLowerCase() as "get"];
    expect(operation, "missing from the document").toBeDefined();
    expect(operation?.operationId).toBe(route.name);
    expect(Object.keys(operation?.responses ?? {})).toContain(String(route.successStatus ?? 200));
    expect(operation?.security).toEqual(route.auth === false ? [] : [{ bearerAuth: [] }]);
  });

  it("documents the Idempotency-Key header of POST /v1/sources with its 409 and 422", () => {
    const operation = document.paths?.["/v1/sources"]?.post;
    expect(operation?.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: "Idempotency-Key",
          in: "header",
          required: false,
          schema: expect.objectContaining({ maxLength: 255 }),
        }),
      ]),
    );
    expect(Object.keys(operation?.responses ?? {})).toEqual(expect.arrayContaining(["409", "422"]));
    expect(document.paths?.["/v1/components"]?.post?.responses?.["422"]).toBeUndefined();
  });

  it("documents path parameters and the error shape", () => {
    const operation = document.paths?.["/v1/workspaces/{workspace_id}"]?.get;
    expect(operation?.parameters).toEqual([
      expect.objectContaining({ name: "workspace_id", in: "path", required: true }),
      expect.objectContaining({ name: "include", in: "query", required: false }),
      expect.objectContaining({ name: "exclude", in: "query", required: false }),
    ]);
    expect(operation?.responses?.["404"]).toBeDefined();
    expect(JSON.stringify(operation?.responses?.["400"])).toContain('"error"');
  });

  it("documents the 409s a route answers, and the 404 of a create's workspace", () => {
    const conflicts = (path: string, method: "post" | "put" | "delete") =>
      (document.paths?.[path]?.[method]?.responses?.["409"] as { description?: string } | undefined)?.description;
    expect(conflicts("/v1/workflows", "post")).toMatch(/external_id/);
    expect(conflicts("/v1/workflows/{workflow_id}", "put")).toMatch(/changed the workflow meanwhile/);
    expect(conflicts("/v1/workflows/{workflow_id}", "delete")).toMatch(/still deploying/);
    expect(conflicts("/v1/sources", "post")).toMatch(/Idempotency-Key is still in progress/);
    expect(conflicts("/v1/accounts/{id}", "delete")).toMatch(/force=true/);
    expect(conflicts("/v1/subscriptions", "post")).toBeUndefined();
    expect(document.paths?.["/v1/workflows"]?.post?.responses?.["404"]).toBeDefined();
    expect(document.paths?.["/v1/users/me/sources"]?.get?.responses?.["404"]).toBeUndefined();
  });

  it("states the prefix and alphabet of every id parameter, so clients and fuzzers can tell ids apart", () => {
    const parameters = Object.values(document.paths ?? {}).flatMap((item) =>
      Object.values(item as Record<string, { parameters?: { name: string; schema?: { pattern?: string } }[] }>).flatMap(
        (operation) => operation.parameters ?? [],
      ),
    );
    const pattern = (name: string) => parameters.find((p) => p.name === name)?.schema?.pattern;
    expect(pattern("workspace_id")).toBe("^o_[A-Za-z0-9_-]{1,64}$");
    expect(pattern("delivery_id")).toBe("^dlv_[A-Za-z0-9_-]{1,64}$");
    const sourceGet = document.paths?.["/v1/sources/{id}"]?.get?.parameters as { schema?: { pattern?: string } }[];
    expect(sourceGet[0]?.schema?.pattern).toBe("^dc_[A-Za-z0-9_-]{1,64}$");
  });

  it("has no path the manifest does not serve, but the live streams, the endpoints and the pause URLs", () => {
    expect(Object.keys(document.paths ?? {}).sort()).toEqual(
      [
        ...new Set([
          ...routes.map((r) => r.path),
          LIVE_STREAM_PATH,
          WORKFLOW_STREAM_PATH,
          ENDPOINT_PATH,
          FLOW_URL_PATH,
        ]),
      ].sort(),
    );
  });

  it("documents a paused run's URLs: every method, no API key, the path the server serves and logs", () => {
    expect(FLOW_URL_PATH).toBe(FLOW_LOG_PATH);
    const sample = "/flow/run_01m8fg2pzc0t9w0tx1sxr2/3OBogzDqUd-GZzttuyt4e_II/resume";
    expect(FLOW_PATH.exec(sample)?.slice(1)).toEqual([
      "run_01m8fg2pzc0t9w0tx1sxr2",
      "3OBogzDqUd-GZzttuyt4e_II",
      "resume",
    ]);
    const item = document.paths?.[FLOW_URL_PATH] as Record<string, any>;
    expect(Object.keys(item).sort()).toEqual(["delete", "get", "patch", "post", "put"]);
    for (const operation of Object.values(item)) {
      expect(operation.security).toEqual([]);
      expect(Object.keys(operation.responses).sort()).toEqual(["202", "404", "409", "413"]);
    }
  });

  it("documents the endpoints of sources and HTTP triggers: every method, no API key, the answers", () => {
    // The path endpoint requests are served and logged under.
    expect(ENDPOINT_PATH).toBe(ENDPOINT_LOG_PATH);
    const item = document.paths?.[ENDPOINT_PATH] as Record<string, any>;
    expect(Object.keys(item).sort()).toEqual(["delete", "get", "patch", "post", "put"]);
    for (const operation of Object.values(item)) {
      expect(operation.security).toEqual([]);
      expect(Object.keys(operation.responses).sort()).toEqual(["200", "400", "404", "413", "429", "508"]);
      expect(operation.parameters).toEqual([expect.objectContaining({ name: "key", in: "path", required: true })]);
    }
  });

  it("documents a workflow's stream: its workflow id, resuming, the key it needs and its text/event-stream answer", () => {
    expect(WORKFLOW_STREAM_PATH).toBe("/workflows/{workflow_id}/sse");
    const item = document.paths?.[WORKFLOW_STREAM_PATH] as Record<string, any>;
    const stream = item.get;
    expect(stream.security).toEqual([{ bearerAuth: [] }]);
    expect(stream.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: "workflow_id",
          in: "path",
          required: true,
          schema: expect.objectContaining({ pattern: "^p_[A-Za-z0-9_-]{1,64}$" }),
        }),
        expect.objectContaining({ name: "last_event_id", in: "query", required: false }),
        expect.objectContaining({ name: "Last-Event-ID", in: "header", required: false }),
      ]),
    );
    expect(stream.parameters.map((parameter: { name: string }) => parameter.name)).not.toContain("event_name");
    expect(Object.keys(stream.responses["200"].content)).toEqual(["text/event-stream"]);
    expect(Object.keys(stream.responses)).toEqual(expect.arrayContaining(["200", "400", "401", "404", "405"]));
  });

  it("documents the live stream: its parameters, the key it needs and its text/event-stream answer", () => {
    expect(LIVE_STREAM_PATH).toBe("/sources/{id}/sse");
    const item = document.paths?.[LIVE_STREAM_PATH] as Record<string, any>;
    expect(Object.keys(item)).toEqual(["get"]);
    const stream = item.get;
    expect(stream.security).toEqual([{ bearerAuth: [] }]);
    expect(stream.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: "id",
          in: "path",
          required: true,
          schema: expect.objectContaining({ pattern: "^dc_[A-Za-z0-9_-]{1,64}$" }),
        }),
        expect.objectContaining({ name: "event_name", in: "query", required: false }),
        expect.objectContaining({ name: "last_event_id", in: "query", required: false }),
        expect.objectContaining({ name: "Last-Event-ID", in: "header", required: false }),
      ]),
    );
    expect(Object.keys(stream.responses["200"].content)).toEqual(["text/event-stream"]);
    expect(Object.keys(stream.responses)).toEqual(expect.arrayContaining(["200", "400", "401", "404", "405"]));
    expect(JSON.stringify(stream.responses["404"])).toContain('"error"');
  });
});
