import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAppsFile } from "#core/app-catalog-file";
import { staticAppCatalog } from "#core/ports/app-catalog";
import type { Deps } from "#core/ports/deps";
import { route as connectAccount } from "#http/connect-account";
import { route as finishConnect } from "#http/finish-account-connect";
import { createHttpHandler, type HttpEvent } from "#http/pipeline";
import type { HttpResult } from "#http/responses";
import type { AnyRoute } from "#http/route";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { type StandInOAuthProvider, startStandInOAuthProvider } from "../../support/oauth-provider.ts";

/*
 * The connect and callback routes through the real middy stack: the callback takes no API key
 * (the one-time state is the proof) and answers an escaped HTML page, 4xx for every failure.
 */

const recorded: HttpEvent = JSON.parse(
  readFileSync(new URL("../../fixtures/api-gateway/get-workspace.json", import.meta.url), "utf8"),
);

function invoke(route: AnyRoute, deps: Deps, event: Partial<HttpEvent> & { authorization?: string }) {
  const { authorization, headers, ...rest } = event;
  const base = structuredClone(recorded);
  delete base.headers.authorization;
  const merged = { ...base.headers, ...(headers as Record<string, string>) } as Record<string, string>;
  if (authorization !== undefined) merged.authorization = authorization;
  const handler = createHttpHandler(route, async () => deps);
  return handler({ ...base, pathParameters: {}, queryStringParameters: {}, ...rest, headers: merged }, {
    awsRequestId: "ctx",
  } as never) as Promise<HttpResult>;
}

let provider: StandInOAuthProvider;
let deps: Deps;
let apiKey: string;
beforeAll(async () => {
  provider = await startStandInOAuthProvider();
  deps = {
    ...memoryDeps(),
    apps: staticAppCatalog(parseAppsFile(JSON.stringify({ apps: [provider.appEntry("standin")] }), "t")),
  };
  apiKey = (await accountIn(deps, "ada")).apiKey;
});
afterAll(() => provider.close());

async function connect(): Promise<Record<string, string>> {
  const started = await invoke(connectAccount, deps, {
    authorization: `Bearer ${apiKey}`,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ app: "standin", name: "Mine" }),
  });
  expect(started.statusCode).toBe(200);
  const answer = await fetch(JSON.parse(started.body).data.authorize_url, { redirect: "manual" });
  return Object.fromEntries(new URL(answer.headers.get("location") ?? "").searchParams);
}

const callback = (query: Record<string, string>) => invoke(finishConnect, deps, { queryStringParameters: query });

describe("GET /v1/accounts/oauth/callback", () => {
  it("needs no API key and answers a page saying the account is connected", async () => {
    const page = await callback(await connect());
    expect(page.statusCode).toBe(200);
    expect(page.headers).toMatchObject({
      "content-type": "text/html; charset=utf-8",
      "referrer-policy": "no-referrer",
      "cache-control": "no-store",
    });
    expect(page.headers["content-security-policy"]).toContain("default-src 'none'");
    expect(page.body).toMatch(
      /<h1>Connected<\/h1>[\s\S]*Stand-in is connected as account apn_\w+ \(&quot;Mine&quot;\)/,
    );
  });

  it("escapes what the provider sends back, and answers 400 creating nothing", async () => {
    provider.denyNext();
    const redirect = await connect();
    const page = await callback({ ...redirect, error_description: '<script>alert("x")</script>' });
    expect(page.statusCode).toBe(400);
    expect(page.body).not.toContain("<script>");
    expect(page.body).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
    // The state is used up: the same redirect again is unknown.
    const again = await callback(redirect);
    expect(again.statusCode).toBe(400);
    expect(again.body).toContain("unknown, was already used, or has expired");
  });

  it("answers a page, not JSON, for a redirect without a state", async () => {
    const page = await callback({ code: "abc" });
    expect(page.statusCode).toBe(400);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
  });
});

describe("POST /v1/accounts/connect", () => {
  it("needs an API key", async () => {
    const answer = await invoke(connectAccount, deps, {
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ app: "standin" }),
    });
    expect(answer.statusCode).toBe(401);
  });
});
