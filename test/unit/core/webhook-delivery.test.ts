import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { LocalSecrets } from "#adapters/local/local-secrets";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteDeadLetterStore } from "#adapters/local/sqlite-dead-letter-store";
import { SqliteIdentityStore } from "#adapters/local/sqlite-identity-store";
import {
  listDeadLetters,
  REPLAY_BATCH_MAX,
  type ReplayDeps,
  replayAllDeadLetters,
  replayDeadLetter,
} from "#core/dead-letters";
import type { Deps } from "#core/ports/deps";
import { randomIdGenerator } from "#core/ports/id-generator";
import { silentLogger } from "#core/ports/logger";
import type { SubscriptionStore } from "#core/ports/subscription-store";
import type { WebhookSender, WebhookSendResult } from "#core/ports/webhook-sender";
import type { DeadLetterRecord, DeliveryRecord, WebhookRecord } from "#core/subscription-model";
import {
  attemptDelivery,
  DEFAULT_DELIVERY_SETTINGS,
  type DeliveryDeps,
  deliverySettings,
  retryDelayBoundMs,
  retryDelayMs,
  retryWindowMs,
} from "#core/webhook-delivery";
import {
  parseSignatureHeader,
  SIGNATURE_HEADER,
  signWebhookBody,
  verifyWebhookSignature,
  webhookSignatureHex,
} from "#core/webhook-signature";
import { route as listRoute } from "#http/list-dead-letters";
import { createHttpHandler, type HttpEvent } from "#http/pipeline";
import { route as replayOneRoute } from "#http/replay-dead-letter";
import { route as replayAllRoute } from "#http/replay-dead-letters";
import { accountIn } from "../../support/memory-deps.ts";

const NOW = Date.UTC(2026, 10, 20, 12);
const SECRET = "whsec_test-secret";

/** The local dead-letter store on a private in-memory database, and what it holds for a webhook. */
function memoryDeadLetters() {
  const store = new SqliteDeadLetterStore(openSqlite(":memory:"));
  const of = async (webhookId = "wh_a") => (await store.listDeadLetters(webhookId, { limit: 100 })).items;
  return Object.assign(store, { of });
}

function webhooksStore(webhooks: WebhookRecord[]): SubscriptionStore {
  return {
    getWebhook: async (id: string) => webhooks.find((w) => w.id === id),
  } as Partial<SubscriptionStore> as SubscriptionStore;
}

async function webhook(secrets: LocalSecrets, userId = "u_ada", id = "wh_a"): Promise<WebhookRecord> {
  return {
    id,
    userId,
    workspaceId: "o_ada",
    url: "http://receiver.test/hook",
    name: "",
    description: "",
    sealedSigningSecret: await secrets.seal(SECRET),
    createdAt: NOW,
    updatedAt: NOW,
  };
}

function delivery(overrides: Partial<DeliveryRecord> = {}): DeliveryRecord {
  return {
    id: "dlv_0001",
    target: { kind: "webhook", webhookId: "wh_a" },
    subscriptionIds: ["sub_1", "sub_2"],
    emitterId: "dc_one",
    eventId: `${NOW}-0`,
    channel: "",
    payload: { id: `${NOW}-0`, event: { hello: "wörld" }, k: "emit" },
    attempts: 0,
    nextAttemptAt: NOW,
    createdAt: NOW,
    ...overrides,
  };
}

/** A sender that answers from a list and records what it was asked to send. */
function scriptedSender(answers: WebhookSendResult[]) {
  const sent: { url: string; headers: Record<string, string>; body: string; timeoutMs: number }[] = [];
  const sender: WebhookSender = {
    async post(url, headers, body, timeoutMs) {
      sent.push({ url, headers: { ...headers }, body, timeoutMs });
      return answers.shift() ?? { status: 200 };
    },
  };
  return { sender, sent };
}

async function deliveryDeps(webhooks?: (secrets: LocalSecrets) => Promise<WebhookRecord[]>) {
  const secrets = new LocalSecrets(randomBytes(32));
  const deadLetters = memoryDeadLetters();
  const list = webhooks ? await webhooks(secrets) : [await webhook(secrets)];
  const deps: DeliveryDeps = {
    subscriptions: webhooksStore(list),
    secrets,
    deadLetters,
    clock: { nowMs: () => NOW + 250 },
    // Webhook deliveries read neither.
    workflows: {} as DeliveryDeps["workflows"],
    objects: {} as DeliveryDeps["objects"],
  };
  return { deps, deadLetters, secrets };
}

describe("webhook signatures", () => {
  const body = JSON.stringify({ a: 1, text: "é" });

  it("signs `<t>.<body>` with HMAC-SHA256 in the t=,v1= header form", () => {
    const header = signWebhookBody(SECRET, 1_800_000_000, body);
    expect(header).toBe(`t=1800000000,v1=${webhookSignatureHex(SECRET, 1_800_000_000, body)}`);
    expect(header).toMatch(/^t=1800000000,v1=[0-9a-f]{64}$/);
    expect(parseSignatureHeader(header)).toEqual({
      timestampSec: 1_800_000_000,
      signatures: [webhookSignatureHex(SECRET, 1_800_000_000, body)],
    });
  });

  it("verifies its own signature within the tolerance", () => {
    const header = signWebhookBody(SECRET, 1_800_000_000, body);
    expect(verifyWebhookSignature(SECRET, header, body, 300, 1_800_000_000)).toBe(true);
    expect(verifyWebhookSignature(SECRET, header, body, 300, 1_800_000_300)).toBe(true);
    expect(verifyWebhookSignature(SECRET, header, body, 300, 1_799_999_700)).toBe(true);
  });

  it("refuses a timestamp outside the tolerance, a changed body, timestamp or secret, and malformed headers", () => {
    const header = signWebhookBody(SECRET, 1_800_000_000, body);
    expect(verifyWebhookSignature(SECRET, header, body, 300, 1_800_000_301)).toBe(false);
    expect(verifyWebhookSignature(SECRET, header, body, 300, 1_799_999_699)).toBe(false);
    expect(verifyWebhookSignature(SECRET, header, body.replace("1", "2"), 300, 1_800_000_000)).toBe(false);
    expect(verifyWebhookSignature("whsec_other", header, body, 300, 1_800_000_000)).toBe(false);
    const movedTime = header.replace("t=1800000000", "t=1800000001");
    expect(verifyWebhookSignature(SECRET, movedTime, body, 300, 1_800_000_000)).toBe(false);
    for (const bad of [undefined, "", "v1=abc", "t=1800000000", `t=x,v1=${"0".repeat(64)}`, "garbage"]) {
      expect(verifyWebhookSignature(SECRET, bad, body, 300, 1_800_000_000)).toBe(false);
    }
  });

  it("accepts a header with several v1 signatures when one of them is right", () => {
    const right = webhookSignatureHex(SECRET, 1_800_000_000, body);
    const header = `t=1800000000,v1=${"ab".repeat(32)},v1=${right}`;
    expect(verifyWebhookSignature(SECRET, header, body, 300, 1_800_000_000)).toBe(true);
  });
});

describe("retry policy", () => {
  it("doubles the delay bound from the base up to the cap", () => {
    const settings = { baseDelayMs: 1_000, maxDelayMs: 10_000 };
    expect([1, 2, 3, 4, 5, 6].map((n) => retryDelayBoundMs(n, settings))).toEqual([
      1_000, 2_000, 4_000, 8_000, 10_000, 10_000,
    ]);
  });

  it("draws delays with full jitter between 0 and the bound", () => {
    const base = { baseDelayMs: 1_000, maxDelayMs: 10_000 };
    expect(retryDelayMs(3, { ...base, random: () => 0 })).toBe(0);
    expect(retryDelayMs(3, { ...base, random: () => 0.5 })).toBe(2_000);
    expect(retryDelayMs(3, { ...base, random: () => 0.999_999_9 })).toBe(4_000);
    for (let failed = 1; failed <= 10; failed++) {
      for (let i = 0; i < 10; i++) {
        const delay = retryDelayMs(failed, { ...base, random: Math.random });
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThanOrEqual(retryDelayBoundMs(failed, base));
      }
    }
  });

  it("bounds the defaults to 8 attempts within about an hour", () => {
    expect(DEFAULT_DELIVERY_SETTINGS.maxAttempts).toBe(8);
    expect(retryWindowMs(DEFAULT_DELIVERY_SETTINGS)).toBe((30 + 60 + 120 + 240 + 480 + 960 + 1800) * 1000);
    expect(() => deliverySettings({ maxAttempts: 0 })).toThrow(/maxAttempts/);
  });
});

describe("attemptDelivery", () => {
  it("POSTs the payload with the documented, verifiable headers and reports a 2xx as delivered", async () => {
    const { deps } = await deliveryDeps();
    const { sender, sent } = scriptedSender([{ status: 204 }]);
    const outcome = await attemptDelivery(deps, sender, delivery(), NOW, deliverySettings({ timeoutMs: 1234 }));
    expect(outcome).toEqual({ kind: "delivered", status: 204, attempts: 1 });
    expect(sent).toHaveLength(1);
    const [request] = sent;
    expect(request?.url).toBe("http://receiver.test/hook");
    expect(request?.timeoutMs).toBe(1234);
    expect(JSON.parse(request?.body ?? "")).toEqual(delivery().payload);
    const t = Math.floor(NOW / 1000);
    expect(request?.headers).toEqual({
      "content-type": "application/json",
      "user-agent": "Sluice-Webhooks/1",
      "x-sluice-event-id": `${NOW}-0`,
      "x-sluice-subscription-id": "sub_1",
      "x-sluice-delivery-id": "dlv_0001",
      "x-sluice-timestamp": String(t),
      [SIGNATURE_HEADER]: expect.stringMatching(new RegExp(`^t=${t},v1=[0-9a-f]{64}$`)),
      "webhook-id": "dlv_0001",
      "webhook-timestamp": String(t),
      "webhook-signature": expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/),
      // A delivery queued without a hop count is the first hop.
      "x-sluice-hops": "1",
    });
    expect(verifyWebhookSignature(SECRET, request?.headers[SIGNATURE_HEADER], request?.body ?? "", 300, t)).toBe(true);
  });

  it("signs the Standard Webhooks headers so that the standardwebhooks library verifies them", async () => {
    const secret = `whsec_${randomBytes(32).toString("base64")}`;
    const { deps } = await deliveryDeps(async (secrets) => [
      { ...(await webhook(secrets)), sealedSigningSecret: await secrets.seal(secret) },
    ]);
    const { sender, sent } = scriptedSender([{ status: 200 }]);
    // The library checks the timestamp against its own clock: sign at the real time.
    await attemptDelivery(deps, sender, delivery(), Date.now());
    const [request] = sent;
    const body = request?.body ?? "";
    const headers = request?.headers ?? {};
    expect(new Webhook(secret).verify(body, headers)).toEqual(delivery().payload);
    expect(() => new Webhook(`whsec_${randomBytes(32).toString("base64")}`).verify(body, headers)).toThrow(
      WebhookVerificationError,
    );
    expect(() => new Webhook(secret).verify(body.replace("wörld", "world"), headers)).toThrow(WebhookVerificationError);
    expect(() => new Webhook(secret).verify(body, { ...headers, "webhook-id": "dlv_other" })).toThrow(
      WebhookVerificationError,
    );
  });

  it("signs with the same key bytes for a secret made before, in base64url (a library takes them raw)", async () => {
    const bytes = randomBytes(32);
    const legacy = `whsec_${bytes.toString("base64url")}`;
    expect(legacy).not.toContain("=");
    const { deps } = await deliveryDeps(async (secrets) => [
      { ...(await webhook(secrets)), sealedSigningSecret: await secrets.seal(legacy) },
    ]);
    const { sender, sent } = scriptedSender([{ status: 200 }]);
    await attemptDelivery(deps, sender, delivery(), Date.now());
    const [request] = sent;
    expect(new Webhook(bytes, { format: "raw" }).verify(request?.body ?? "", request?.headers ?? {})).toEqual(
      delivery().payload,
    );
    expect(
      new Webhook(`whsec_${bytes.toString("base64")}`).verify(request?.body ?? "", request?.headers ?? {}),
    ).toEqual(delivery().payload);
  });

  it("retries a non-2xx, a 3xx or a network error after a jittered delay counted from the end of the attempt", async () => {
    const { deps, deadLetters } = await deliveryDeps();
    const settings = deliverySettings({ baseDelayMs: 1_000, maxDelayMs: 60_000, random: () => 0.5 });
    for (const [answer, error] of [
      [{ status: 503 }, "HTTP 503"],
      [{ status: 302 }, "HTTP 302"],
      [
        { error: "ECONNREFUSED: receiver.test:80 refused the connection" },
        "ECONNREFUSED: receiver.test:80 refused the connection",
      ],
      [{ error: "timeout after 10000 ms" }, "timeout after 10000 ms"],
    ] as const) {
      const { sender } = scriptedSender([answer]);
      const outcome = await attemptDelivery(deps, sender, delivery({ attempts: 2 }), NOW, settings);
      // Third failure: bound 4 s, half of it with random() = 0.5.
      expect(outcome).toEqual({ kind: "retry", at: NOW + 250 + 2_000, attempts: 3, error });
    }
    expect(await deadLetters.of()).toEqual([]);
  });

  it("keeps the delivery as a dead letter when the last attempt fails", async () => {
    const { deps, deadLetters } = await deliveryDeps();
    const { sender } = scriptedSender([{ status: 500 }]);
    const settings = deliverySettings({ maxAttempts: 3 });
    const outcome = await attemptDelivery(deps, sender, delivery({ attempts: 2 }), NOW, settings);
    expect(outcome).toEqual({ kind: "dead", attempts: 3, error: "HTTP 500" });
    expect(await deadLetters.of()).toEqual([
      { ...delivery(), attempts: 3, lastError: "HTTP 500", userId: "u_ada", failedAt: NOW + 250 },
    ]);
  });

  it("drops the delivery of a deleted webhook without sending anything", async () => {
    const { deps, deadLetters } = await deliveryDeps(async () => []);
    const { sender, sent } = scriptedSender([]);
    expect(await attemptDelivery(deps, sender, delivery(), NOW)).toEqual({
      kind: "dropped",
      reason: "the webhook was deleted",
    });
    expect(sent).toEqual([]);
    expect(await deadLetters.of()).toEqual([]);
  });

  it("keeps no dead letter when the webhook was deleted while its last attempt was sent", async () => {
    const list: WebhookRecord[] = [];
    const { deps, deadLetters } = await deliveryDeps(async (secrets) => {
      list.push(await webhook(secrets));
      return list;
    });
    // The receiver answers 500 once the webhook's DELETE has removed it (and its dead letters).
    const sender: WebhookSender = {
      async post() {
        list.length = 0;
        return { status: 500 };
      },
    };
    const settings = deliverySettings({ maxAttempts: 3 });
    expect(await attemptDelivery(deps, sender, delivery({ attempts: 2 }), NOW, settings)).toEqual({
      kind: "dropped",
      reason: "the webhook was deleted",
    });
    expect(await deadLetters.of()).toEqual([]);
  });

  it("rejects, without counting an attempt, when the signing secret cannot be opened", async () => {
    const { deps } = await deliveryDeps(async (secrets) => [
      { ...(await webhook(secrets)), sealedSigningSecret: "tampered" },
    ]);
    const { sender, sent } = scriptedSender([]);
    await expect(attemptDelivery(deps, sender, delivery(), NOW)).rejects.toThrow();
    expect(sent).toEqual([]);
  });
});

describe("dead letters: list and replay", () => {
  async function replayHarness() {
    const secrets = new LocalSecrets(randomBytes(32));
    const deadLetters = memoryDeadLetters();
    const queued: DeliveryRecord[][] = [];
    const deps: ReplayDeps = {
      subscriptions: webhooksStore([await webhook(secrets), await webhook(secrets, "u_bob", "wh_bob")]),
      deadLetters,
      deliveries: {
        enqueue: async (batch) => {
          queued.push(structuredClone([...batch]));
        },
      },
      clock: { nowMs: () => NOW + 9_000 },
    };
    const dead = (id: string, webhookId = "wh_a"): DeadLetterRecord => ({
      ...delivery({ id, target: { kind: "webhook", webhookId }, attempts: 8, nextAttemptAt: NOW + 5_000 }),
      lastError: "HTTP 500",
      userId: webhookId === "wh_a" ? "u_ada" : "u_bob",
      failedAt: NOW + 6_000,
    });
    return { deps, deadLetters, queued, dead };
  }
  const ada = { userId: "u_ada" };

  it("lists a webhook's dead letters newest first, paginated, for its owner only", async () => {
    const { deps, deadLetters, dead } = await replayHarness();
    for (const id of ["dlv_0001", "dlv_0002", "dlv_0003"]) await deadLetters.putDeadLetter(dead(id));
    const first = await listDeadLetters(deps, ada, "wh_a", { limit: 2 });
    expect(first.page_info).toMatchObject({ total_count: 3, count: 2 });
    expect(first.data.map((d) => d.id)).toEqual(["dlv_0003", "dlv_0002"]);
    expect(first.data[0]).toEqual({
      id: "dlv_0003",
      webhook_id: "wh_a",
      subscription_ids: ["sub_1", "sub_2"],
      emitter_id: "dc_one",
      event_id: `${NOW}-0`,
      event_name: "",
      attempts: 8,
      last_error: "HTTP 500",
      created_at: Math.floor(NOW / 1000),
      failed_at: Math.floor((NOW + 6_000) / 1000),
      payload: delivery().payload,
    });
    await expect(listDeadLetters(deps, ada, "wh_bob", { limit: 2 })).rejects.toMatchObject({ code: "not_found" });
    await expect(listDeadLetters(deps, ada, "wh_missing", { limit: 2 })).rejects.toMatchObject({ code: "not_found" });
  });

  it("replays one dead letter under the same delivery id with its attempts reset, then forgets it", async () => {
    const { deps, deadLetters, queued, dead } = await replayHarness();
    await deadLetters.putDeadLetter(dead("dlv_0001"));
    await deadLetters.putDeadLetter(dead("dlv_0002"));
    expect(await replayDeadLetter(deps, ada, "wh_a", "dlv_0001")).toEqual({
      id: "dlv_0001",
      webhook_id: "wh_a",
      replayed: true,
    });
    expect(queued).toEqual([[{ ...delivery({ id: "dlv_0001" }), attempts: 0, nextAttemptAt: NOW + 9_000 }]]);
    expect((await deadLetters.of()).map((d) => d.id)).toEqual(["dlv_0002"]);
    await expect(replayDeadLetter(deps, ada, "wh_a", "dlv_0001")).rejects.toMatchObject({ code: "not_found" });
  });

  it("refuses to replay another account's dead letter as not found", async () => {
    const { deps, deadLetters, queued, dead } = await replayHarness();
    await deadLetters.putDeadLetter(dead("dlv_0009", "wh_bob"));
    await expect(replayDeadLetter(deps, ada, "wh_bob", "dlv_0009")).rejects.toMatchObject({ code: "not_found" });
    await expect(replayAllDeadLetters(deps, ada, "wh_bob")).rejects.toMatchObject({ code: "not_found" });
    expect(queued).toEqual([]);
    expect(await deadLetters.of("wh_bob")).toHaveLength(1);
  });

  it("replays the oldest dead letters in one enqueue, in order, bounded by the batch", async () => {
    const { deps, deadLetters, queued, dead } = await replayHarness();
    for (let i = 1; i <= 5; i++) await deadLetters.putDeadLetter(dead(`dlv_000${i}`));
    expect(await replayAllDeadLetters(deps, ada, "wh_a", 3)).toEqual({ webhook_id: "wh_a", replayed: 3, remaining: 2 });
    expect(queued.map((batch) => batch.map((d) => [d.id, d.attempts]))).toEqual([
      [
        ["dlv_0001", 0],
        ["dlv_0002", 0],
        ["dlv_0003", 0],
      ],
    ]);
    expect(await replayAllDeadLetters(deps, ada, "wh_a")).toEqual({ webhook_id: "wh_a", replayed: 2, remaining: 0 });
    expect(await replayAllDeadLetters(deps, ada, "wh_a")).toEqual({ webhook_id: "wh_a", replayed: 0, remaining: 0 });
    expect(queued).toHaveLength(2);
    expect(await deadLetters.of()).toEqual([]);
    expect(REPLAY_BATCH_MAX).toBe(100);
  });
});

describe("dead-letter routes through the HTTP pipeline", () => {
  const recorded: HttpEvent = JSON.parse(
    readFileSync(new URL("../../fixtures/api-gateway/get-workspace.json", import.meta.url), "utf8"),
  );

  async function setup() {
    // Only the ports these routes use: identity for the API key, and fakes of the rest.
    const clock = { nowMs: () => NOW };
    const secrets = new LocalSecrets(randomBytes(32));
    const deadLetters = memoryDeadLetters();
    const queued: DeliveryRecord[] = [];
    const base = {
      identity: new SqliteIdentityStore(openSqlite(":memory:")),
      clock,
      ids: randomIdGenerator(clock),
      log: silentLogger,
      secrets,
    };
    const { apiKey, user } = await accountIn(base as Partial<Deps> as Deps, "ada");
    const hook = { ...(await webhook(secrets, user.id)), id: "wh_01m7xmwmfs81fnt1b2yfcg" };
    const deps = {
      ...base,
      subscriptions: webhooksStore([hook]),
      deadLetters,
      deliveries: {
        enqueue: async (batch: readonly DeliveryRecord[]) => {
          queued.push(...batch);
        },
      },
    } as Partial<Deps> as Deps;
    const call = (route: Parameters<typeof createHttpHandler>[0], event: Partial<HttpEvent>) => {
      const request = structuredClone(recorded);
      request.headers.authorization = `Bearer ${apiKey}`;
      request.queryStringParameters = {};
      return createHttpHandler(route, async () => deps)({ ...request, ...event }, { awsRequestId: "x" } as never);
    };
    return { deps, deadLetters, queued, hook, call, userId: user.id };
  }

  it("lists, replays one and replays all", async () => {
    const { deadLetters, queued, hook, call, userId } = await setup();
    for (const id of ["dlv_01m7xmwmfs81fnt1b2yfc1", "dlv_01m7xmwmfs81fnt1b2yfc2"]) {
      await deadLetters.putDeadLetter({
        ...delivery({ id, target: { kind: "webhook", webhookId: hook.id }, attempts: 8 }),
        userId,
        failedAt: NOW,
      });
    }
    const listed = await call(listRoute, { pathParameters: { id: hook.id }, queryStringParameters: { limit: "1" } });
    expect(listed.statusCode).toBe(200);
    const page = JSON.parse(listed.body);
    expect(page.page_info).toMatchObject({ total_count: 2, count: 1 });
    expect(page.data[0].id).toBe("dlv_01m7xmwmfs81fnt1b2yfc2");

    const one = await call(replayOneRoute, {
      pathParameters: { id: hook.id, delivery_id: "dlv_01m7xmwmfs81fnt1b2yfc2" },
    });
    expect(one.statusCode).toBe(200);
    expect(JSON.parse(one.body)).toEqual({
      data: { id: "dlv_01m7xmwmfs81fnt1b2yfc2", webhook_id: hook.id, replayed: true },
    });
    const all = await call(replayAllRoute, { pathParameters: { id: hook.id }, queryStringParameters: { limit: "10" } });
    expect(JSON.parse(all.body)).toEqual({ data: { webhook_id: hook.id, replayed: 1, remaining: 0 } });
    expect(queued.map((d) => d.id)).toEqual(["dlv_01m7xmwmfs81fnt1b2yfc2", "dlv_01m7xmwmfs81fnt1b2yfc1"]);
  });

  it("answers 400 naming the parameter for bad ids, limits and cursors, and 404 for unknown ones", async () => {
    const { hook, call } = await setup();
    const cases: [Parameters<typeof call>[0], Partial<HttpEvent>, string][] = [
      [listRoute, { pathParameters: { id: "dc_123" } }, "id"],
      [listRoute, { pathParameters: { id: hook.id }, queryStringParameters: { limit: "0" } }, "limit"],
      [listRoute, { pathParameters: { id: hook.id }, queryStringParameters: { limit: "101" } }, "limit"],
      [listRoute, { pathParameters: { id: hook.id }, queryStringParameters: { after: "!!" } }, "after"],
      [replayOneRoute, { pathParameters: { id: hook.id, delivery_id: "sub_1" } }, "delivery_id"],
      [replayOneRoute, { pathParameters: { id: "o_x", delivery_id: "dlv_1" } }, "id"],
      [replayAllRoute, { pathParameters: { id: hook.id }, queryStringParameters: { limit: "abc" } }, "limit"],
      [replayAllRoute, { pathParameters: { id: hook.id }, queryStringParameters: { limit: "101" } }, "limit"],
    ];
    for (const [route, event, field] of cases) {
      const result = await call(route, event);
      expect(result.statusCode, `${route.name} ${JSON.stringify(event)}`).toBe(400);
      expect(JSON.parse(result.body).details.map((d: { field: string }) => d.field)).toContain(field);
    }
    const missing = await call(replayOneRoute, {
      pathParameters: { id: hook.id, delivery_id: "dlv_01m7xmwmfs81fnt1b2yfc9" },
    });
    expect(missing.statusCode).toBe(404);
    const otherWebhook = await call(listRoute, { pathParameters: { id: "wh_01m7xmwmfs81fnt1b2yfc0" } });
    expect(otherWebhook.statusCode).toBe(404);
  });
});
