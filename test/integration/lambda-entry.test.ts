import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbIdentityStore } from "#adapters/aws/dynamodb-identity-store";
import { type CreatedAccount, createAccount } from "#core/accounts";
import { systemClock } from "#core/ports/clock";
import { randomIdGenerator } from "#core/ports/id-generator";
import type { HttpEvent } from "#http/pipeline";
import type { HttpResult } from "#http/responses";
import { bundleLambdaFiles } from "../../lib/constructs/esbuild-code.ts";
import { createResourcesTable, lambdaEnvFor, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { REPO_ROOT } from "../support/local-process.ts";

type LambdaHandler = (event: HttpEvent, context: unknown) => Promise<HttpResult>;

const recorded: HttpEvent = JSON.parse(
  readFileSync(new URL("../fixtures/api-gateway/get-workspace.json", import.meta.url), "utf8"),
);
const context = { awsRequestId: "lambda-request", getRemainingTimeInMillis: () => 10_000 };

/** Bundles a route's entry as the service stack does (ESM, node22, the AWS SDK bundled). */
async function bundle(entry: string): Promise<LambdaHandler> {
  // Inside node_modules, whose cache folder git and the linters ignore.
  const outdir = join(REPO_ROOT, "node_modules", ".cache", "sluice-test-bundles", String(process.pid));
  bundleLambdaFiles({ [`${entry}.mjs`]: `functions/http/${entry}.ts` }, outdir, { awsImports: "parts" });
  return (await import(pathToFileURL(join(outdir, `${entry}.mjs`)).href)).handler;
}

describe("Lambda entry points against DynamoDB Local", () => {
  let account: CreatedAccount;

  beforeAll(async () => {
    const endpoint = inject("dynamodbEndpoint");
    const table = await createResourcesTable(endpoint, `lambda-entry-${process.pid}`);
    const client = localDynamoDbClient(endpoint);
    account = await createAccount(
      {
        identity: new DynamoDbIdentityStore(documentClient(client), table),
        clock: systemClock,
        ids: randomIdGenerator(systemClock),
      },
      { username: "lambda", email: "lambda@example.com" },
    );
    client.destroy();
    const env = lambdaEnvFor(table, endpoint);
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  });
  afterAll(() => {
    vi.unstubAllEnvs();
  });

  const eventFor = (key: string): HttpEvent => ({
    ...recorded,
    headers: { ...recorded.headers, authorization: `Bearer ${key}` },
    pathParameters: { workspace_id: account.workspace.id },
  });

  // Only a bundle has the real parts and composition root (outside one, `#aws-parts/*` and
  // `#aws-composition` are stand-ins): the plain route's first request, as on Lambda.
  it("serves GET /v1/users/me from an esbuild bundle of the route file's handler export", async () => {
    const handler = await bundle("get-me");
    const result = await handler({ ...eventFor(account.apiKey), queryStringParameters: undefined }, context);
    expect(result.statusCode).toBe(200);
    expect(JSON.parse(result.body).data).toMatchObject({ id: account.user.id, orgs: [{ id: account.workspace.id }] });
  });

  it("serves GET /v1/workspaces/{id} from an esbuild bundle of the entry, with include applied", async () => {
    const handler = await bundle("get-workspace");
    const result = await handler(eventFor(account.apiKey), context);
    expect(result.statusCode).toBe(200);
    expect(JSON.parse(result.body)).toEqual({ data: { id: account.workspace.id, name: "lambda" } });
    expect((await handler(eventFor("sluice_not-a-real-key-000000000000"), context)).statusCode).toBe(401);
  });

  it("answers unrouted requests from the $default function's bundle with 404 and 405", async () => {
    const handler = await bundle("route-not-found");
    const unrouted = (method: string, path: string) =>
      handler(
        {
          ...recorded,
          rawPath: path,
          requestContext: { ...recorded.requestContext, http: { ...recorded.requestContext.http, method, path } },
        },
        context,
      );
    const notFound = await unrouted("GET", "/v1/nope");
    expect([notFound.statusCode, JSON.parse(notFound.body)]).toEqual([404, { error: "no route for GET /v1/nope" }]);
    const slashed = await unrouted("GET", "/v1/users/me/");
    expect([slashed.statusCode, slashed.headers.location]).toEqual([308, "/v1/users/me"]);
    const wrongMethod = await unrouted("POST", "/v1/users/me");
    expect([wrongMethod.statusCode, wrongMethod.headers.allow]).toEqual([405, "GET"]);
  });
});
