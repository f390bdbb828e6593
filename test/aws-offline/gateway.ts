/**
 * The HTTP API played on 127.0.0.1 from the service template's own `AWS::ApiGatewayV2::Route` and
 * `Integration` resources (moto's CloudFormation creates no HTTP API): a request is matched to a
 * route key as API Gateway does (the most specific path first, a method before `ANY`, `$default`
 * last), turned into the payload 2.0 event local mode also builds, and its integration's function
 * is invoked through the local Lambda. A route or integration missing from the template is
 * missing here too.
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { toApiGatewayEvent } from "#local-mode/api-gateway-event";
import type { LocalLambda } from "./local-lambda.ts";
import type { CfnTemplate } from "./templates.ts";

export interface GatewayRoute {
  routeKey: string;
  /** The integration's function, by its name in moto. */
  functionName: string;
}

/** The template's routes, each with the function its integration invokes. */
export function routesOf(template: CfnTemplate, functionNames: ReadonlyMap<string, string>): GatewayRoute[] {
  const resources = template.Resources;
  return Object.values(resources)
    .filter((resource) => resource.Type === "AWS::ApiGatewayV2::Route")
    .map((route) => {
      const target = route.Properties?.Target as { "Fn::Join": [string, unknown[]] };
      const integrationRef = target["Fn::Join"][1].find((part): part is { Ref: string } => typeof part === "object");
      const integration = resources[integrationRef?.Ref ?? ""];
      if (integration?.Type !== "AWS::ApiGatewayV2::Integration")
        throw new Error(`route ${route.Properties?.RouteKey}: no integration`);
      const uri = integration.Properties?.IntegrationUri as { "Fn::GetAtt": [string, string] };
      const functionName = functionNames.get(uri["Fn::GetAtt"][0]);
      if (!functionName) throw new Error(`route ${route.Properties?.RouteKey}: its function was not deployed`);
      if (integration.Properties?.PayloadFormatVersion !== "2.0") throw new Error("payload format 2.0 expected");
      return { routeKey: route.Properties?.RouteKey as string, functionName };
    });
}

interface Matched {
  route: GatewayRoute;
  pathParameters?: Record<string, string>;
}

/** Rank of a segment of a route's path: a literal is more specific than a parameter, which is more than a greedy one. */
const rank = (segment: string) => (segment.endsWith("+}") ? 0 : segment.startsWith("{") ? 1 : 2);

export function matchRoute(routes: readonly GatewayRoute[], method: string, path: string): Matched | undefined {
  const segments = path.split("/").slice(1);
  const candidates: { matched: Matched; score: number[] }[] = [];
  for (const route of routes) {
    if (route.routeKey === "$default") continue;
    const [routeMethod, routePath = ""] = route.routeKey.split(" ");
    if (routeMethod !== method && routeMethod !== "ANY") continue;
    const pattern = routePath.split("/").slice(1);
    const params: Record<string, string> = {};
    let matches = true;
    for (const [index, part] of pattern.entries()) {
      const segment = segments[index];
      if (part.endsWith("+}")) {
        const rest = segments.slice(index).join("/");
        if (rest === "") matches = false;
        else params[part.slice(1, -2)] = rest;
        break;
      }
      if (segment === undefined || segment === "") matches = false;
      else if (part.startsWith("{")) params[part.slice(1, -1)] = decodeURIComponent(segment);
      else if (part !== segment) matches = false;
      if (!matches) break;
    }
    const greedy = pattern.at(-1)?.endsWith("+}") ?? false;
    if (!matches || (!greedy && pattern.length !== segments.length)) continue;
    const pathParameters = Object.keys(params).length > 0 ? params : undefined;
    candidates.push({
      matched: { route, ...(pathParameters ? { pathParameters } : {}) },
      score: [...pattern.map(rank), routeMethod === method ? 1 : 0],
    });
  }
  candidates.sort((a, b) => compareScores(b.score, a.score));
  const best = candidates[0]?.matched;
  if (best) return best;
  const fallback = routes.find((route) => route.routeKey === "$default");
  return fallback ? { route: fallback } : undefined;
}

function compareScores(a: number[], b: number[]): number {
  for (let index = 0; index < Math.max(a.length, b.length); index++) {
    const difference = (a[index] ?? -1) - (b[index] ?? -1);
    if (difference !== 0) return difference;
  }
  return 0;
}

export interface Gateway {
  /** The API's endpoint (no trailing slash), what its `ApiEndpoint` resolves to. */
  readonly endpoint: string;
  /** Starts serving the routes; requests before that answer 503. */
  serve(routes: readonly GatewayRoute[]): void;
  close(): Promise<void>;
}

/** Listens first (the stack's functions are told its URL), serves once the routes are known. */
export async function startGateway(lambda: () => LocalLambda): Promise<Gateway> {
  let routes: readonly GatewayRoute[] | undefined;
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const url = new URL(request.url ?? "/", `http://${request.headers.host ?? "127.0.0.1"}`);
    const method = request.method ?? "GET";
    const matched = routes ? matchRoute(routes, method, url.pathname) : undefined;
    if (!matched) {
      response.writeHead(routes ? 404 : 503, { "content-type": "application/json" });
      response.end(JSON.stringify({ message: "Not Found" }));
      return;
    }
    const event = toApiGatewayEvent(
      request,
      url,
      Buffer.concat(chunks),
      {
        routeKey: matched.route.routeKey,
        ...(matched.pathParameters ? { pathParameters: matched.pathParameters } : {}),
      },
      randomUUID(),
      Date.now(),
    );
    const { result, functionError } = await lambda().invoke(matched.route.functionName, event);
    if (functionError) {
      response.writeHead(500, { "content-type": "application/json" });
      response.end(JSON.stringify({ message: "Internal Server Error" }));
      return;
    }
    writeResult(response, result);
  };
  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(502, { "content-type": "application/json" });
      response.end(JSON.stringify({ message: String(error) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    serve(served) {
      routes = served;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A payload 2.0 result as API Gateway answers it: a result without `statusCode` is a 200 of its JSON. */
function writeResult(response: ServerResponse, result: unknown): void {
  const structured =
    typeof result === "object" && result !== null && "statusCode" in result
      ? (result as {
          statusCode: number;
          headers?: Record<string, string>;
          body?: string;
          isBase64Encoded?: boolean;
          cookies?: string[];
        })
      : { statusCode: 200, headers: { "content-type": "application/json" }, body: JSON.stringify(result) };
  const headers: Record<string, string | string[]> = { ...structured.headers };
  if (structured.cookies?.length) headers["set-cookie"] = structured.cookies;
  response.writeHead(structured.statusCode, headers);
  response.end(
    structured.body === undefined
      ? undefined
      : Buffer.from(structured.body, structured.isBase64Encoded ? "base64" : "utf8"),
  );
}
