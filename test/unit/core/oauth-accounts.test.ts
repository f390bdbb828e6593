import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { SqliteAppAccountStore } from "#adapters/local/sqlite-app-account-store";
import { testAccount } from "#core/account-checks";
import { currentCredentials, openCredentials } from "#core/account-credentials";
import { REFRESH_AHEAD_MS, refreshExpiringAccounts } from "#core/account-refresh-sweep";
import { parseAppsFile } from "#core/app-catalog-file";
import type { Caller } from "#core/identity";
import { finishConnect, OAUTH_CALLBACK_PATH, startConnect } from "#core/oauth-connect";
import type { AppAccountRecord } from "#core/ports/app-account-store";
import { staticAppCatalog } from "#core/ports/app-catalog";
import { jsonLogger } from "#core/ports/logger";
import { createAccountRefresherHandler } from "#internal/account-refresher";
import { startAccountRefreshDriver } from "#local-mode/drivers/account-refresh-driver";
import { eventually, when } from "../../support/eventually.ts";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { STAND_IN_USER, type StandInOAuthProvider, startStandInOAuthProvider } from "../../support/oauth-provider.ts";
import { sourceRecord } from "../../support/source-record.ts";

/*
 * The OAuth side of connected accounts against a stand-in provider on 127.0.0.1, through the real
 * HTTP adapter: connect (PKCE), the callback's exchange, refresh in currentCredentials (single
 * flight, the version-conditional update across "processes", refusal) and the health check.
 */

let provider: StandInOAuthProvider;
beforeAll(async () => {
  provider = await startStandInOAuthProvider();
});
afterAll(() => provider.close());

function depsWithApps() {
  const apps = parseAppsFile(
    JSON.stringify({
      apps: [
        provider.appEntry("standin"),
        provider.appEntry("unconfigured", { configured: false }),
        { name_slug: "keyed", name: "Keyed", auth_type: "keys", fields: ["api_key"] },
      ],
    }),
    "test apps",
  );
  // Every line of every level, to show that none carries a secret.
  const lines: string[] = [];
  const deps = { ...memoryDeps(), apps: staticAppCatalog(apps), log: jsonLogger({}, (line) => lines.push(line)) };
  return { deps, lines, clock: deps.clock };
}

/** What a browser does with the authorize URL: the provider's redirect, read without following it. */
async function approve(authorizeUrl: string): Promise<Record<string, string>> {
  const answer = await fetch(authorizeUrl, { redirect: "manual" });
  expect(answer.status).toBe(302);
  const location = new URL(answer.headers.get("location") ?? "");
  expect(`${location.origin}${location.pathname}`).toBe(`http://127.0.0.1:4000${OAUTH_CALLBACK_PATH}`);
  return Object.fromEntries(location.searchParams);
}

describe("connecting an OAuth app", () => {
  let setup: ReturnType<typeof depsWithApps>;
  let caller: Caller;
  let ada: Awaited<ReturnType<typeof accountIn>>;
  beforeEach(async () => {
    provider.refuseRefreshes = false;
    provider.tokenLifetimeSeconds = 3600;
    provider.tokenDelayMs = 0;
    provider.singleUseRefreshTokens = false;
    setup = depsWithApps();
    ada = await accountIn(setup.deps, "ada");
    caller = { userId: ada.user.id };
  });

  const connect = async (name?: string) => {
    const started = await startConnect(setup.deps, caller, { app: "standin", name });
    const page = await finishConnect(setup.deps, await approve(started.authorize_url));
    return { started, page };
  };

  it("answers the provider's URL with state and an S256 challenge, and keeps the verifier sealed", async () => {
    const started = await startConnect(setup.deps, caller, { app: "standin" });
    const url = new URL(started.authorize_url);
    expect(`${url.origin}${url.pathname}`).toBe(`${provider.origin}/authorize`);
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      response_type: "code",
      client_id: provider.clientId,
      redirect_uri: started.redirect_uri,
      state: started.state,
      code_challenge_method: "S256",
      scope: "read",
    });
    expect(url.searchParams.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(started.expires_at) - setup.clock.nowMs()).toBe(10 * 60_000);
    const pending = await setup.deps.appAccounts.takePendingConnect(started.state, setup.clock.nowMs());
    expect(pending?.sealedVerifier).not.toContain(url.searchParams.get("code_challenge"));
    expect((await setup.deps.secrets.open(pending?.sealedVerifier ?? "")).length).toBeGreaterThanOrEqual(43);
  });

  it("refuses apps that are unknown, not OAuth, or whose client is not configured, naming the setting", async () => {
    await expect(startConnect(setup.deps, caller, { app: "nope" })).rejects.toMatchObject({ code: "validation" });
    await expect(startConnect(setup.deps, caller, { app: "keyed" })).rejects.toThrow(/not an OAuth app/);
    await expect(startConnect(setup.deps, caller, { app: "unconfigured" })).rejects.toThrow(
      /"oauth.client_id" and "oauth.client_secret" in SLUICE_APPS_FILE/,
    );
  });

  it("exchanges the code with the verifier and creates a healthy account with the tokens and the user's id", async () => {
    const { page } = await connect("Ada's");
    expect(page).toMatchObject({ status: 200, title: "Connected", accountId: expect.stringMatching(/^apn_/) });
    const account = (await setup.deps.appAccounts.get(page.accountId ?? "")) as AppAccountRecord;
    expect(account).toMatchObject({ app: "standin", name: "Ada's", healthy: true, ownerId: caller.userId });
    expect(account.expiresAt).toBe(setup.clock.nowMs() + 3600_000);
    expect(await openCredentials(setup.deps, account.sealedCredentials)).toEqual({
      oauth_access_token: provider.accessTokens.at(-1),
      oauth_refresh_token: expect.stringMatching(/^rt-/),
      oauth_client_id: provider.clientId,
      oauth_uid: STAND_IN_USER.id,
    });
  });

  it("holds OAuth connections to the workspace's 1,000 accounts, and refuses a blank name, as key accounts", async () => {
    const store = setup.deps.appAccounts;
    const started = await startConnect(setup.deps, caller, { app: "standin" });
    // Filled meanwhile: the callback connects nothing.
    const count = store.count.bind(store);
    store.count = async () => 1000;
    const page = await finishConnect(setup.deps, await approve(started.authorize_url));
    expect(page).toMatchObject({ status: 409, title: "Too many accounts" });
    expect(page.accountId).toBeUndefined();
    await expect(startConnect(setup.deps, caller, { app: "standin" })).rejects.toMatchObject({ code: "conflict" });
    store.count = count;
    expect(await store.count(ada.workspace.id)).toBe(0);
    await expect(startConnect(setup.deps, caller, { app: "standin", name: "   " })).rejects.toMatchObject({
      code: "validation",
      message: "name: must not be empty",
    });
  });

  it("keeps a hostile expires_in to a whole number of seconds of at most ten years", async () => {
    provider.tokenLifetimeSeconds = 1e300;
    const huge = await connect();
    expect((await setup.deps.appAccounts.get(huge.page.accountId ?? ""))?.expiresAt).toBe(
      setup.clock.nowMs() + 10 * 365 * 86_400_000,
    );
    provider.tokenLifetimeSeconds = 90.7;
    const fractional = await connect();
    expect((await setup.deps.appAccounts.get(fractional.page.accountId ?? ""))?.expiresAt).toBe(
      setup.clock.nowMs() + 90_000,
    );
  });

  it("answers a 4xx page and creates nothing for a reused, unknown or expired state, or a refusal", async () => {
    const started = await startConnect(setup.deps, caller, { app: "standin" });
    const redirect = await approve(started.authorize_url);
    expect((await finishConnect(setup.deps, redirect)).status).toBe(200);
    const reused = await finishConnect(setup.deps, redirect);
    expect(reused).toMatchObject({ status: 400, title: "Unknown or expired authorization" });
    expect((await finishConnect(setup.deps, { ...redirect, state: "made-up" })).status).toBe(400);
    expect((await finishConnect(setup.deps, { code: "x" })).status).toBe(400);

    const late = await startConnect(setup.deps, caller, { app: "standin" });
    const lateRedirect = await approve(late.authorize_url);
    setup.clock.set(setup.clock.nowMs() + 10 * 60_000 + 1);
    expect(await finishConnect(setup.deps, lateRedirect)).toMatchObject({ status: 400 });

    provider.denyNext();
    const denied = await startConnect(setup.deps, caller, { app: "standin" });
    const deniedPage = await finishConnect(setup.deps, await approve(denied.authorize_url));
    expect(deniedPage).toMatchObject({ status: 400, title: "Not authorized" });
    expect(deniedPage.message).toContain("access_denied: The user said <no>");

    const accounts = await setup.deps.appAccounts.list(
      (await setup.deps.identity.listWorkspacesOfUser(caller.userId))[0]?.id ?? "",
      { limit: 10 },
    );
    expect(accounts.accounts).toHaveLength(1);
  });

  it("answers 400 when the provider refuses the code (a wrong verifier or a used code), creating nothing", async () => {
    const started = await startConnect(setup.deps, caller, { app: "standin" });
    const redirect = await approve(started.authorize_url);
    // Another connect's state with this code: the verifier does not match the code's challenge.
    const other = await startConnect(setup.deps, caller, { app: "standin" });
    const page = await finishConnect(setup.deps, { code: redirect.code, state: other.state });
    expect(page).toMatchObject({ status: 400, title: "Not connected" });
    expect(page.message).toContain("invalid_grant");
  });

  describe("refresh", () => {
    it("refreshes once for many concurrent uses when the token expires within their time", async () => {
      provider.tokenLifetimeSeconds = 120;
      provider.tokenDelayMs = 50;
      const { page } = await connect();
      const account = (await setup.deps.appAccounts.get(page.accountId ?? "")) as AppAccountRecord;
      const before = provider.tokenRequests.length;
      // Two minutes left: enough for a one-minute run without refreshing...
      expect((await currentCredentials(setup.deps, account, 30_000)).oauth_access_token).toBe(
        provider.accessTokens.at(-1),
      );
      expect(provider.tokenRequests.length).toBe(before);
      // ...not for a five-minute one: ten of those at once make one refresh.
      const uses = await Promise.all(
        Array.from({ length: 10 }, () => currentCredentials(setup.deps, account, 300_000)),
      );
      expect(provider.tokenRequests.slice(before)).toEqual(["refresh_token"]);
      const fresh = provider.accessTokens.at(-1);
      expect(new Set(uses.map((credentials) => credentials.oauth_access_token))).toEqual(new Set([fresh]));
      const stored = (await setup.deps.appAccounts.get(account.id)) as AppAccountRecord;
      expect(stored).toMatchObject({ version: 2, healthy: true, expiresAt: setup.clock.nowMs() + 120_000 });
      // The caller's stale record does not make a second refresh: the stored one is read first.
      provider.tokenLifetimeSeconds = 3600;
      await currentCredentials(setup.deps, account, 0);
      expect(provider.tokenRequests.slice(before)).toEqual(["refresh_token"]);
    });

    it("lets the loser of a race between processes use the winner's token", async () => {
      provider.tokenLifetimeSeconds = 30;
      provider.tokenDelayMs = 50;
      const { page } = await connect();
      // Another process on the same database: its own store object, so its own single flight.
      const other = { ...setup.deps, appAccounts: new SqliteAppAccountStore(setup.deps.sqlite) };
      const account = (await setup.deps.appAccounts.get(page.accountId ?? "")) as AppAccountRecord;
      const before = provider.tokenRequests.length;
      const [mine, theirs] = await Promise.all([
        currentCredentials(setup.deps, account, 60_000),
        currentCredentials(other, account, 60_000),
      ]);
      expect(provider.tokenRequests.slice(before)).toEqual(["refresh_token", "refresh_token"]);
      expect(mine.oauth_access_token).toBe(theirs.oauth_access_token);
      const stored = (await setup.deps.appAccounts.get(account.id)) as AppAccountRecord;
      expect(stored.version).toBe(2);
      expect((await openCredentials(setup.deps, stored.sealedCredentials)).oauth_access_token).toBe(
        mine.oauth_access_token,
      );
    });

    it("lets the loser use the winner's token when the provider refuses it the refresh token the winner used", async () => {
      provider.tokenLifetimeSeconds = 30;
      provider.tokenDelayMs = 50;
      provider.singleUseRefreshTokens = true;
      const { page } = await connect();
      const other = { ...setup.deps, appAccounts: new SqliteAppAccountStore(setup.deps.sqlite) };
      const account = (await setup.deps.appAccounts.get(page.accountId ?? "")) as AppAccountRecord;
      const issued = provider.accessTokens.length;
      const uses = await Promise.allSettled([
        currentCredentials(setup.deps, account, 60_000),
        currentCredentials(other, account, 60_000),
      ]);
      // The provider granted one of the two refreshes: its token is stored, and the account healthy.
      expect(provider.accessTokens).toHaveLength(issued + 1);
      const granted = provider.accessTokens.at(-1);
      const stored = (await setup.deps.appAccounts.get(account.id)) as AppAccountRecord;
      expect(stored.healthy).toBe(true);
      expect((await openCredentials(setup.deps, stored.sealedCredentials)).oauth_access_token).toBe(granted);
      // The winner's use has it; the loser's has it too unless its refusal came before the winner's write.
      const got = uses.flatMap((use) => (use.status === "fulfilled" ? [use.value.oauth_access_token] : []));
      expect(got.length).toBeGreaterThan(0);
      expect(new Set(got)).toEqual(new Set([granted]));
      for (const use of uses)
        if (use.status === "rejected") expect(use.reason).toMatchObject({ code: "unprocessable" });
    });

    it("marks the account unhealthy and fails the use clearly when the provider refuses, never naming a token", async () => {
      provider.tokenLifetimeSeconds = 30;
      const { page } = await connect();
      const account = (await setup.deps.appAccounts.get(page.accountId ?? "")) as AppAccountRecord;
      provider.refuseRefreshes = true;
      const failure = currentCredentials(setup.deps, account, 60_000);
      await expect(failure).rejects.toMatchObject({ code: "unprocessable" });
      await expect(failure).rejects.toThrow(`account ${account.id} (standin) needs to be connected again`);
      await expect(failure).rejects.toThrow(/invalid_grant/);
      const stored = (await setup.deps.appAccounts.get(account.id)) as AppAccountRecord;
      expect(stored.healthy).toBe(false);
      expect(stored.lastError).toMatch(/refused to refresh.*400 \(invalid_grant\)/);
      const credentials = await openCredentials(setup.deps, account.sealedCredentials);
      const written = JSON.stringify([stored.lastError, setup.lines]);
      for (const secret of [credentials.oauth_access_token, credentials.oauth_refresh_token, provider.clientSecret]) {
        expect(written).not.toContain(secret);
      }
    });
  });

  describe("the background refresh", () => {
    it("renews the tokens expiring within its window, once each, and leaves the others alone", async () => {
      provider.tokenLifetimeSeconds = 5 * 60;
      const soon = (await connect("soon")).page.accountId as string;
      provider.tokenLifetimeSeconds = 3600;
      const later = (await connect("later")).page.accountId as string;
      const before = provider.tokenRequests.length;
      // A 5-minute token is renewed after half its life, not at every sweep of the 10-minute window.
      expect(await refreshExpiringAccounts(setup.deps)).toEqual({ due: 0, renewed: 0, failed: 0 });
      setup.clock.set(setup.clock.nowMs() + 151_000);
      const outcome = await refreshExpiringAccounts(setup.deps);
      expect(outcome).toEqual({ due: 1, renewed: 1, failed: 0 });
      expect(provider.tokenRequests.slice(before)).toEqual(["refresh_token"]);
      const renewed = (await setup.deps.appAccounts.get(soon)) as AppAccountRecord;
      expect(renewed).toMatchObject({ healthy: true, version: 2, expiresAt: setup.clock.nowMs() + 3_600_000 });
      expect((await openCredentials(setup.deps, renewed.sealedCredentials)).oauth_access_token).toBe(
        provider.accessTokens.at(-1),
      );
      expect((await setup.deps.appAccounts.get(later))?.version).toBe(1);
      // Nothing expires within the window any more: the next sweep asks the provider nothing.
      expect(await refreshExpiringAccounts(setup.deps)).toEqual({ due: 0, renewed: 0, failed: 0 });
      expect(provider.tokenRequests.length).toBe(before + 1);
      // Within ten minutes of its hour, the other one is due (the renewed one has 2.5 min more).
      setup.clock.set(setup.clock.nowMs() + 3_600_000 - 151_000 - REFRESH_AHEAD_MS + 1_000);
      expect(await refreshExpiringAccounts(setup.deps)).toEqual({ due: 1, renewed: 1, failed: 0 });
      expect((await setup.deps.appAccounts.get(later))?.version).toBe(2);
    });

    it("runs in local mode on a timer until stopped", async () => {
      provider.tokenLifetimeSeconds = 60;
      const id = (await connect()).page.accountId as string;
      setup.clock.set(setup.clock.nowMs() + 31_000);
      provider.tokenLifetimeSeconds = 3600;
      provider.tokenDelayMs = 30;
      const before = provider.tokenRequests.length;
      const driver = startAccountRefreshDriver(setup.deps, 5);
      try {
        await eventually(async () => when((await setup.deps.appAccounts.get(id))?.version === 2), "the renewal");
      } finally {
        await driver.stop();
      }
      expect(provider.tokenRequests.slice(before)).toEqual(["refresh_token"]);
      setup.clock.set(setup.clock.nowMs() + 3_600_000);
      await new Promise((resolve) => setTimeout(resolve, 30));
      expect(provider.tokenRequests.length).toBe(before + 1);
    });

    it("runs on AWS as the scheduled account refresher, with the deps its composition gives", async () => {
      provider.tokenLifetimeSeconds = 60;
      const id = (await connect()).page.accountId as string;
      setup.clock.set(setup.clock.nowMs() + 31_000);
      await createAccountRefresherHandler(async () => setup.deps)();
      expect((await setup.deps.appAccounts.get(id))?.version).toBe(2);
    });

    it("marks an account whose refresh is refused unhealthy, notes it on its sources' $errors, and leaves it to a new connection", async () => {
      provider.tokenLifetimeSeconds = 60;
      const { page } = await connect();
      const id = page.accountId as string;
      const using = "dc_01kab0000000000000using";
      const other = "dc_01kab0000000000000other";
      await setup.deps.sources.createSource({
        ...sourceRecord(ada, using),
        configuredProps: { standin: { authProvisionId: id } },
      });
      await setup.deps.sources.createSource({ ...sourceRecord(ada, other), nameSlug: "other", configuredProps: {} });
      setup.clock.set(setup.clock.nowMs() + 31_000);
      provider.refuseRefreshes = true;
      const before = provider.tokenRequests.length;
      expect(await refreshExpiringAccounts(setup.deps)).toEqual({ due: 1, renewed: 0, failed: 1 });
      expect(await setup.deps.appAccounts.get(id)).toMatchObject({
        healthy: false,
        lastError: expect.stringContaining("refused"),
      });
      const errors = async (sourceId: string) =>
        (await setup.deps.events.listEvents(sourceId, { channel: "$errors", limit: 10, count: false })).items;
      const [noted] = await errors(using);
      expect(noted?.event).toMatchObject({
        error: {
          code: "AccountError",
          message: `account ${id} (standin) needs to be connected again: the provider refused to refresh its token: the token endpoint answered 400 (invalid_grant)`,
        },
        original_context: { deployment_id: using },
      });
      expect(await errors(other)).toEqual([]);
      expect(await refreshExpiringAccounts(setup.deps)).toEqual({ due: 0, renewed: 0, failed: 0 });
      expect(provider.tokenRequests.length).toBe(before + 1);
      expect(await errors(using)).toHaveLength(1);
      expect(setup.lines.join("\n")).not.toContain(provider.accessTokens.at(-1) as string);
    });
  });

  describe("health", () => {
    it("runs the test request on demand and stores the verdict", async () => {
      const { page } = await connect();
      const id = page.accountId ?? "";
      expect(await testAccount(setup.deps, caller, id)).toMatchObject({ id, healthy: true, app: { name: "Stand-in" } });
      const before = (await setup.deps.appAccounts.get(id)) as AppAccountRecord;
      provider.revoke(provider.accessTokens.at(-1) ?? "");
      expect(await testAccount(setup.deps, caller, id)).toMatchObject({ id, healthy: false });
      const after = (await setup.deps.appAccounts.get(id)) as AppAccountRecord;
      expect(after).toMatchObject({
        healthy: false,
        lastError: "the test request answered 401",
        version: before.version + 1,
      });
    });

    it("answers not found for another workspace's account", async () => {
      const { page } = await connect();
      const stranger = await accountIn(setup.deps, "eve");
      await expect(testAccount(setup.deps, { userId: stranger.user.id }, page.accountId ?? "")).rejects.toMatchObject({
        code: "not_found",
      });
    });

    it("never puts a substituted value in the verdict when the request fails", async () => {
      const apps = parseAppsFile(
        JSON.stringify({
          apps: [
            {
              ...provider.appEntry("leaky"),
              test_request: {
                method: "GET",
                // A closed port, with the token in the URL and a header Node refuses.
                url: "http://127.0.0.1:9/me?token={{$auth.oauth_access_token}}",
                headers: { "X-Token": "{{$auth.oauth_access_token}}" },
              },
            },
          ],
        }),
        "leaky apps",
      );
      const deps = { ...setup.deps, apps: staticAppCatalog([...setup.deps.apps.list(), ...apps]) };
      const started = await startConnect(deps, caller, { app: "leaky" });
      const page = await finishConnect(deps, await approve(started.authorize_url));
      // Connected all the same, marked unhealthy, and the page says why.
      expect(page.message).toMatch(/Its test request failed \(the test request failed: ECONNREFUSED/);
      const stored = (await deps.appAccounts.get(page.accountId ?? "")) as AppAccountRecord;
      expect(stored.healthy).toBe(false);
      const view = await testAccount(deps, caller, stored.id);
      expect(view.healthy).toBe(false);
      const after = (await deps.appAccounts.get(stored.id)) as AppAccountRecord;
      expect(after.lastError).toMatch(/^the test request failed: ECONNREFUSED/);
      expect(after.version).toBe(stored.version + 1);
      const token = (await openCredentials(deps, stored.sealedCredentials)).oauth_access_token as string;
      expect(JSON.stringify([after.lastError, page.message, setup.lines])).not.toContain(token);
    });
  });
});
