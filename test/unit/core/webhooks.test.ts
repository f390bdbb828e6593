import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { decodeCursor } from "#core/pagination";
import { createAutoSubscription, createSubscription } from "#core/subscriptions";
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listWebhooks,
  openSigningSecret,
  rotateWebhookSecret,
  WEBHOOK_URL_MAX_LENGTH,
} from "#core/webhooks";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { rejection } from "../../support/rejection.ts";

/** Two accounts on the real local stores (an in-memory SQLite database). */
async function setUp() {
  const deps = memoryDeps(Date.UTC(2026, 10, 20, 12));
  const owner = await accountIn(deps, "owner");
  const stranger = await accountIn(deps, "stranger");
  return {
    deps,
    owner: { userId: owner.user.id },
    ownerWorkspace: owner.workspace.id,
    stranger: { userId: stranger.user.id },
    strangerWorkspace: stranger.workspace.id,
  };
}

describe("createWebhook", () => {
  it("answers the webhook with a whsec_ signing secret that only the creation answer shows", async () => {
    const { deps, owner } = await setUp();
    const created = await createWebhook(deps, owner, {
      url: "https://hooks.example.com/in",
      name: "Ops",
      description: "to the ops channel",
    });
    expect(created).toMatchObject({
      id: expect.stringMatching(/^wh_/),
      user_id: owner.userId,
      url: "https://hooks.example.com/in",
      name: "Ops",
      description: "to the ops channel",
      active: true,
      created_at: Date.UTC(2026, 10, 20, 12) / 1000,
      updated_at: Date.UTC(2026, 10, 20, 12) / 1000,
    });
    // 32 random bytes in standard base64, as Standard Webhooks libraries decode what follows whsec_.
    expect(created.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(() => new Webhook(created.signing_secret)).not.toThrow();

    const fetched = await getWebhook(deps, owner, created.id);
    expect(fetched).not.toHaveProperty("signing_secret");
    const { signing_secret: _secret, ...withoutSecret } = created;
    expect(fetched).toEqual(withoutSecret);
    const listed = await listWebhooks(deps, owner, { limit: 10 });
    expect(JSON.stringify(listed)).not.toContain(created.signing_secret);

    const stored = (await deps.subscriptions.getWebhook(created.id))!;
    expect(stored.sealedSigningSecret).not.toContain(created.signing_secret);
    expect(await openSigningSecret(deps, stored)).toBe(created.signing_secret);
  });

  it("shows a missing name or description as null", async () => {
    const { deps, owner } = await setUp();
    const created = await createWebhook(deps, owner, { url: "http://127.0.0.1:8080/" });
    expect(created.name).toBeNull();
    expect(created.description).toBeNull();
  });

  it.each([
    "http://127.0.0.1:8080/hooks/a?token=abc",
    "https://example.com",
    "HTTPS://Example.com/Path/To",
    "http://localhost:3000",
    "http://[::1]:9000/x",
  ])("accepts %s", async (url) => {
    const { deps, owner } = await setUp();
    expect((await createWebhook(deps, owner, { url })).url).toBe(url);
  });

  it.each([
    [undefined, "is required"],
    ["", "is required"],
    ["example.com/hook", "must start with http:// or https://"],
    ["ftp://example.com/hook", "must start with http:// or https://"],
    ["mailto:ops@example.com", "must start with http:// or https://"],
    ["javascript:alert(1)", "must start with http:// or https://"],
    ["http:example.com", "must start with http:// or https://"],
    ["http://", "must start with http:// or https://"],
    ["https:///path-only", "must start with http:// or https://"],
    ["http://exa mple.com/", "must not contain spaces"],
    [" http://example.com/", "must not contain spaces"],
    ["http://example.com/\n", "must not contain spaces"],
    ["http://user:pass@example.com/", "must not contain credentials"],
    ["http://user@example.com/", "must not contain credentials"],
    ["http://example.com:0/", "must not use port 0"],
    ["http://example.com:99999/", "is not a valid URL"],
    ["http://example.com/#part", "must not contain a fragment"],
    // 127.0.0.1 to a WHATWG parser, `evil` to tools that read the stored URL otherwise.
    ["http://127.0.0.1\\@evil/", "must not contain a backslash"],
    ["http://example.com\\hook", "must not contain a backslash"],
    [`https://example.com/${"a".repeat(WEBHOOK_URL_MAX_LENGTH)}`, "must be at most"],
  ])("answers 400 naming url for %j", async (url, message) => {
    const { deps, owner } = await setUp();
    const error = await rejection(createWebhook(deps, owner, { url }));
    expect(error.code).toBe("validation");
    expect(error.issues).toEqual([{ field: "url", message: expect.stringContaining(message) }]);
    expect((await deps.subscriptions.listWebhooksOfUser(owner.userId, { limit: 10 })).totalCount).toBe(0);
  });

  it("answers 400 naming name or description when they are too long", async () => {
    const { deps, owner } = await setUp();
    const url = "https://example.com/";
    expect((await rejection(createWebhook(deps, owner, { url, name: "n".repeat(201) }))).issues?.[0]?.field).toBe(
      "name",
    );
    expect(
      (await rejection(createWebhook(deps, owner, { url, description: "d".repeat(1001) }))).issues?.[0]?.field,
    ).toBe("description");
  });

  it("records the webhook under the named workspace, and 404s on another account's workspace", async () => {
    const { deps, owner, ownerWorkspace, strangerWorkspace } = await setUp();
    const created = await createWebhook(deps, owner, { url: "https://example.com/", workspace_id: ownerWorkspace });
    expect((await deps.subscriptions.getWebhook(created.id))?.workspaceId).toBe(ownerWorkspace);
    const error = await rejection(
      createWebhook(deps, owner, { url: "https://example.com/", workspace_id: strangerWorkspace }),
    );
    expect(error.code).toBe("not_found");
  });
});

describe("listWebhooks", () => {
  it("pages through the caller's webhooks only, newest first", async () => {
    const { deps, owner, stranger } = await setUp();
    const ids: string[] = [];
    for (let n = 0; n < 3; n++) {
      deps.clock.set(Date.UTC(2026, 10, 20, 12, n));
      ids.push((await createWebhook(deps, owner, { url: `https://example.com/${n}` })).id);
    }
    await createWebhook(deps, stranger, { url: "https://stranger.example.com/" });

    const first = await listWebhooks(deps, owner, { limit: 2 });
    expect(first.page_info).toMatchObject({ total_count: 3, count: 2 });
    expect(first.data.map((w) => w.id)).toEqual([ids[2], ids[1]]);
    const after = decodeCursor(first.page_info.end_cursor!, "after");
    const second = await listWebhooks(deps, owner, { limit: 2, after });
    expect(second.data.map((w) => w.id)).toEqual([ids[0]]);
    expect((await listWebhooks(deps, stranger, { limit: 10 })).data.map((w) => w.url)).toEqual([
      "https://stranger.example.com/",
    ]);
  });
});

describe("rotateWebhookSecret", () => {
  it("replaces the secret at once and shows the new one only in its answer", async () => {
    const { deps, owner } = await setUp();
    const created = await createWebhook(deps, owner, { url: "https://example.com/" });
    deps.clock.set(Date.UTC(2026, 10, 21));
    const rotated = await rotateWebhookSecret(deps, owner, created.id);
    expect(rotated.signing_secret).toMatch(/^whsec_/);
    expect(rotated.signing_secret).not.toBe(created.signing_secret);
    expect(rotated.updated_at).toBe(Date.UTC(2026, 10, 21) / 1000);
    expect(rotated.created_at).toBe(created.created_at);
    const stored = (await deps.subscriptions.getWebhook(created.id))!;
    expect(await openSigningSecret(deps, stored)).toBe(rotated.signing_secret);
    expect(await getWebhook(deps, owner, created.id)).not.toHaveProperty("signing_secret");
  });
});

describe("another account's webhook", () => {
  it("is 404 for get, rotate and delete, and stays untouched with its subscriptions", async () => {
    const { deps, owner, stranger } = await setUp();
    const created = await createWebhook(deps, owner, { url: "https://example.com/" });
    const subscription = await createSubscription(deps, owner, { emitter_id: "dc_*", listener_id: created.id });
    const before = await deps.subscriptions.getWebhook(created.id);
    for (const attempt of [
      getWebhook(deps, stranger, created.id),
      rotateWebhookSecret(deps, stranger, created.id),
      deleteWebhook(deps, stranger, created.id),
    ]) {
      const error = await rejection(attempt);
      expect(error.code).toBe("not_found");
      expect(error.message).toBe("webhook not found");
    }
    expect(await deps.subscriptions.getWebhook(created.id)).toEqual(before);
    const left = await deps.subscriptions.listSubscriptionsOfUser(owner.userId, { limit: 10 });
    expect(left.items.map((s) => s.id)).toEqual([subscription.id]);
  });

  it("is 404 like a webhook that does not exist", async () => {
    const { deps, owner } = await setUp();
    expect((await rejection(getWebhook(deps, owner, "wh_0000000000000000000000"))).code).toBe("not_found");
  });
});

describe("deleteWebhook", () => {
  it("removes the webhook with its subscriptions, auto subscriptions and dead letters; a second delete is 404", async () => {
    const { deps, owner } = await setUp();
    const kept = await createWebhook(deps, owner, { url: "https://example.com/kept" });
    const gone = await createWebhook(deps, owner, { url: "https://example.com/gone" });
    for (const webhook of [kept, gone]) {
      await createSubscription(deps, owner, { emitter_id: "dc_*", listener_id: webhook.id });
      await createAutoSubscription(deps, owner, { event_name: "$errors", listener_id: webhook.id });
      await deps.deadLetters.putDeadLetter({
        id: deps.ids.newId("delivery"),
        target: { kind: "webhook", webhookId: webhook.id },
        subscriptionIds: [],
        emitterId: "dc_x",
        eventId: "1-0",
        channel: "",
        payload: {},
        attempts: 5,
        nextAttemptAt: 0,
        createdAt: 0,
        userId: owner.userId,
        failedAt: 1,
      });
    }

    expect(await deleteWebhook(deps, owner, gone.id)).toEqual({ id: gone.id, deleted: true });
    expect(await deps.subscriptions.getWebhook(gone.id)).toBeUndefined();
    const subscriptions = await deps.subscriptions.listSubscriptionsOfUser(owner.userId, { limit: 100 });
    expect(subscriptions.items.map((s) => s.listenerId)).toEqual([kept.id]);
    const autos = await deps.subscriptions.listAutoSubscriptionsOfUser(owner.userId);
    expect(autos.map((a) => a.listenerId)).toEqual([kept.id]);
    expect((await deps.deadLetters.listDeadLetters(gone.id, { limit: 100 })).totalCount).toBe(0);
    expect((await deps.deadLetters.listDeadLetters(kept.id, { limit: 100 })).totalCount).toBe(1);
    expect((await rejection(deleteWebhook(deps, owner, gone.id))).code).toBe("not_found");
  });
});
