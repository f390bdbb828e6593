import { describe, expect, it } from "vitest";
import type { Caller } from "#core/identity";
import { decodeCursor, type PageInfo, UNPAGINATED_LIST_MAX } from "#core/pagination";
import type { Deps } from "#core/ports/deps";
import type { IdentityStore } from "#core/ports/identity-store";
import { deleteSource, deploySource } from "#core/sources";
import {
  applyAutoSubscriptions,
  createAutoSubscription,
  createSubscription,
  deleteSubscription,
  listUserSubscriptions,
  listWorkspaceSubscriptions,
} from "#core/subscriptions";
import { createWebhook } from "#core/webhooks";
import { createWorkflow } from "#core/workflows";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";
import { rejection } from "../../support/rejection.ts";
import { workflowRecord } from "../../support/workflow-record.ts";

/**
 * Two accounts, each with a deployed source and a webhook, on the real local stores (an in-memory
 * SQLite database). The host records, at each `deploy` hook, the `$errors` and `$logs`
 * subscriptions that already named the deploying source as emitter.
 */
async function setUp() {
  const seenAtDeploy: string[][] = [];
  const { host } = scriptedHost({ hooks: ["deploy"] }, async (invocation) => {
    if (invocation.kind === "deploy") {
      const found = await Promise.all(
        ["$errors", "$logs"].map((channel) => deps.subscriptions.findSubscriptions([invocation.sourceId], channel)),
      );
      seenAtDeploy.push(found.flat().map((s) => `${s.listenerId} ${s.eventName}`));
    }
    return {};
  });
  const deps = memoryDeps(Date.UTC(2026, 10, 20, 12), {
    host,
    timers: { schedule: async () => {}, cancel: async () => {} },
  });
  const ownerAccount = await accountIn(deps, "owner");
  const strangerAccount = await accountIn(deps, "stranger");
  const owner = { userId: ownerAccount.user.id };
  const stranger = { userId: strangerAccount.user.id };
  const source = await deploySource(deps, owner, { component_code: "owner's code", name: "emitter" });
  const webhook = await createWebhook(deps, owner, { url: "http://127.0.0.1:9000/in" });
  const strangerSource = await deploySource(deps, stranger, { component_code: "stranger's code" });
  const strangerWebhook = await createWebhook(deps, stranger, { url: "http://127.0.0.1:9001/in" });
  for (const id of [WORKFLOW_ID, OTHER_WORKFLOW_ID])
    await deps.workflows.createWorkflow(workflowRecord(ownerAccount, id));
  await deps.workflows.createWorkflow(workflowRecord(strangerAccount, STRANGER_WORKFLOW_ID));
  return {
    deps,
    seenAtDeploy,
    owner,
    ownerWorkspace: ownerAccount.workspace.id,
    stranger,
    strangerWorkspace: strangerAccount.workspace.id,
    source,
    webhook,
    strangerSource,
    strangerWebhook,
  };
}

/** Every subscription a user made, as stored. */
async function storedSubscriptions(deps: Deps, caller: Caller) {
  return (await deps.subscriptions.listSubscriptionsOfUser(caller.userId, { limit: 100 })).items;
}

const WORKFLOW_ID = "p_01jd0000000000000000ab";
const OTHER_WORKFLOW_ID = "p_01jd0000000000000000cd";
const STRANGER_WORKFLOW_ID = "p_01jd0000000000000000ef";

describe("createSubscription", () => {
  it("subscribes a webhook to a source's default channel and answers the subscription", async () => {
    const { deps, owner, ownerWorkspace, source, webhook } = await setUp();
    const created = await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id });
    expect(created).toEqual({
      id: expect.stringMatching(/^sub_/),
      emitter_id: source.id,
      listener_id: webhook.id,
      event_name: "",
      created_at: Date.UTC(2026, 10, 20, 12) / 1000,
    });
    expect(await deps.subscriptions.findSubscriptions([source.id], "")).toEqual([
      expect.objectContaining({
        id: created.id,
        userId: owner.userId,
        workspaceId: ownerWorkspace,
        emitterKind: "source",
        emitterKey: source.id,
        listenerKind: "webhook",
      }),
    ]);
  });

  it("answers the same subscription when created twice, and stores one", async () => {
    const { deps, owner, source, webhook } = await setUp();
    const first = await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id });
    deps.clock.set(Date.UTC(2026, 10, 21));
    const second = await createSubscription(deps, owner, {
      emitter_id: source.id,
      listener_id: webhook.id,
      event_name: "",
    });
    expect(second).toEqual(first);
    expect((await storedSubscriptions(deps, owner)).length).toBe(1);
  });

  it("keys dc_* and p_* globs by the subscribing user", async () => {
    const { deps, owner, webhook } = await setUp();
    const sources = await createSubscription(deps, owner, { emitter_id: "dc_*", listener_id: webhook.id });
    const workflows = await createSubscription(deps, owner, {
      emitter_id: "p_*",
      listener_id: webhook.id,
      event_name: "$errors",
    });
    expect(sources.emitter_id).toBe("dc_*");
    expect(await deps.subscriptions.findSubscriptions([`dc_*:${owner.userId}`], "")).toEqual([
      expect.objectContaining({ id: sources.id, emitterKind: "sources-glob" }),
    ]);
    expect(await deps.subscriptions.findSubscriptions([`p_*:${owner.userId}`], "$errors")).toEqual([
      expect.objectContaining({ id: workflows.id, emitterKind: "workflows-glob" }),
    ]);
  });

  it("takes the caller's workflows as emitter and listener, listed under the workflow's workspace", async () => {
    const { deps, owner, ownerWorkspace, source } = await setUp();
    const fromWorkflow = await createSubscription(deps, owner, { emitter_id: WORKFLOW_ID, listener_id: source.id });
    const toWorkflow = await createSubscription(deps, owner, {
      emitter_id: source.id,
      listener_id: OTHER_WORKFLOW_ID,
      event_name: "custom",
    });
    const stored = await storedSubscriptions(deps, owner);
    expect(stored.find((s) => s.id === fromWorkflow.id)).toMatchObject({
      emitterKind: "workflow",
      emitterKey: WORKFLOW_ID,
    });
    expect(stored.find((s) => s.id === toWorkflow.id)).toMatchObject({
      listenerKind: "workflow",
      workspaceId: ownerWorkspace,
      eventName: "custom",
    });
  });

  it("404s a workflow of another account, or one that does not exist, as emitter or listener", async () => {
    const { deps, owner, stranger, source, webhook, strangerSource } = await setUp();
    for (const [caller, input] of [
      [owner, { emitter_id: STRANGER_WORKFLOW_ID, listener_id: webhook.id }],
      [owner, { emitter_id: source.id, listener_id: STRANGER_WORKFLOW_ID }],
      [owner, { emitter_id: "p_MOCn3Ez", listener_id: webhook.id }],
      [stranger, { emitter_id: WORKFLOW_ID, listener_id: STRANGER_WORKFLOW_ID }],
      [stranger, { emitter_id: strangerSource.id, listener_id: WORKFLOW_ID }],
    ] as const) {
      expect(await rejection(createSubscription(deps, caller, input))).toMatchObject({
        code: "not_found",
        message: "workflow not found",
      });
    }
    expect(
      await rejection(
        createAutoSubscription(deps, owner, { event_name: "$errors", listener_id: STRANGER_WORKFLOW_ID }),
      ),
    ).toMatchObject({ code: "not_found" });
    expect(await storedSubscriptions(deps, owner)).toEqual([]);
    expect(await storedSubscriptions(deps, stranger)).toEqual([]);
  });

  it("404s, without answering or changing it, when another account names a subscription between workflows", async () => {
    const { deps, owner, stranger } = await setUp();
    const input = { emitter_id: WORKFLOW_ID, listener_id: OTHER_WORKFLOW_ID, event_name: "$errors" };
    const theirs = await createSubscription(deps, owner, input);
    const refused = await rejection(createSubscription(deps, stranger, input));
    expect(refused).toMatchObject({ code: "not_found", message: "workflow not found" });
    expect(JSON.stringify(refused)).not.toContain(theirs.id);
    expect(await storedSubscriptions(deps, stranger)).toEqual([]);
    expect((await storedSubscriptions(deps, owner)).map((s) => [s.id, s.userId])).toEqual([[theirs.id, owner.userId]]);
    expect(await createSubscription(deps, owner, input)).toEqual(theirs);
  });

  it("lists a workflow listener's subscription under its workspace, and refuses another workspace named", async () => {
    const { deps, owner, ownerWorkspace, strangerWorkspace, source } = await setUp();
    const named = await createSubscription(deps, owner, {
      emitter_id: source.id,
      listener_id: WORKFLOW_ID,
      workspace_id: ownerWorkspace,
    });
    const listed = await listWorkspaceSubscriptions(deps, owner, ownerWorkspace, { limit: 10 });
    expect(listed.data.map((s) => s.id)).toEqual([named.id]);
    const foreign = await rejection(
      createSubscription(deps, owner, {
        emitter_id: source.id,
        listener_id: OTHER_WORKFLOW_ID,
        workspace_id: strangerWorkspace,
      }),
    );
    expect(foreign.code).toBe("not_found");
    expect((await storedSubscriptions(deps, owner)).map((s) => s.id)).toEqual([named.id]);
  });

  it("lets a source listen to its own channel", async () => {
    const { deps, owner, source } = await setUp();
    const self = await createSubscription(deps, owner, {
      emitter_id: source.id,
      listener_id: source.id,
      event_name: "self",
    });
    expect(self).toMatchObject({ emitter_id: source.id, listener_id: source.id, event_name: "self" });
  });

  it("takes a workspace the caller belongs to as emitter of $errors only", async () => {
    const { deps, owner, ownerWorkspace, strangerWorkspace, webhook } = await setUp();
    const errors = await createSubscription(deps, owner, {
      emitter_id: ownerWorkspace,
      listener_id: webhook.id,
      event_name: "$errors",
    });
    expect(await deps.subscriptions.findSubscriptions([ownerWorkspace], "$errors")).toEqual([
      expect.objectContaining({ id: errors.id, emitterKind: "workspace" }),
    ]);
    for (const event_name of [undefined, "", "$logs", "custom"]) {
      const error = await rejection(
        createSubscription(deps, owner, { emitter_id: ownerWorkspace, listener_id: webhook.id, event_name }),
      );
      expect(error.issues).toEqual([
        { field: "event_name", message: "must be $errors when emitter_id is a workspace" },
      ]);
    }
    const foreign = await rejection(
      createSubscription(deps, owner, {
        emitter_id: strangerWorkspace,
        listener_id: webhook.id,
        event_name: "$errors",
      }),
    );
    expect(foreign.code).toBe("not_found");
  });

  it.each([
    [undefined, ""],
    ["", ""],
    ["default", ""],
    ["orders", "orders"],
    ["with spaces and ünïcode", "with spaces and ünïcode"],
    ["$errors", "$errors"],
    ["$logs", "$logs"],
    ["e".repeat(128), "e".repeat(128)],
  ])("stores event_name %j as channel %j", async (event_name, channel) => {
    const { deps, owner, source, webhook } = await setUp();
    const created = await createSubscription(deps, owner, {
      emitter_id: source.id,
      listener_id: webhook.id,
      event_name,
    });
    expect(created.event_name).toBe(channel);
  });

  it.each([
    ["$in", "reserved channels are $errors and $logs"],
    ["$", "reserved channels are $errors and $logs"],
    ["$ERRORS", "reserved channels are $errors and $logs"],
    ["e".repeat(129), "must be at most 128 characters"],
    ["tab\there", "must not contain control characters"],
  ])("answers 400 naming event_name for %j", async (event_name, message) => {
    const { deps, owner, source, webhook } = await setUp();
    const error = await rejection(
      createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id, event_name }),
    );
    expect(error.code).toBe("validation");
    expect(error.issues).toEqual([{ field: "event_name", message: expect.stringContaining(message) }]);
  });

  it.each([
    [undefined, "is required"],
    ["", "is required"],
    ["dc_", "must be a source id"],
    ["dc_**", "must be a source id"],
    ["dc_a.b", "must be a source id"],
    ["*", "must be a source id"],
    ["wh_01jd0000000000000000ab", "must be a source id"],
    ["sc_01jd0000000000000000ab", "must be a source id"],
    ["DC_01JD0000000000000000AB", "must be a source id"],
    [`dc_${"0".repeat(80)}`, "is not a valid id"],
  ])("answers 400 naming emitter_id for %j", async (emitter_id, message) => {
    const { deps, owner, webhook } = await setUp();
    const error = await rejection(createSubscription(deps, owner, { emitter_id, listener_id: webhook.id }));
    expect(error.code).toBe("validation");
    expect(error.issues).toEqual([{ field: "emitter_id", message: expect.stringContaining(message) }]);
  });

  it.each([
    [undefined, "is required"],
    ["", "is required"],
    ["dc_*", "must be a webhook id"],
    ["p_*", "must be a webhook id"],
    ["o_01jd0000000000000000ab", "must be a webhook id"],
    ["wh_", "must be a webhook id"],
    ["https://example.com/", "must be a webhook id"],
  ])("answers 400 naming listener_id for %j", async (listener_id, message) => {
    const { deps, owner, source } = await setUp();
    const error = await rejection(createSubscription(deps, owner, { emitter_id: source.id, listener_id }));
    expect(error.code).toBe("validation");
    expect(error.issues).toEqual([{ field: "listener_id", message: expect.stringContaining(message) }]);
  });

  it("answers 400 for a malformed id before looking up another account's resource", async () => {
    const { deps, owner, strangerSource } = await setUp();
    const error = await rejection(createSubscription(deps, owner, { emitter_id: strangerSource.id, listener_id: "x" }));
    expect(error.code).toBe("validation");
  });

  it("answers 404 for another account's source or webhook, as for a missing one, and stores nothing", async () => {
    const { deps, owner, source, webhook, strangerSource, strangerWebhook } = await setUp();
    const attempts = [
      { emitter_id: strangerSource.id, listener_id: webhook.id },
      { emitter_id: source.id, listener_id: strangerWebhook.id },
      { emitter_id: source.id, listener_id: strangerSource.id },
      { emitter_id: "dc_*", listener_id: strangerWebhook.id },
      { emitter_id: "dc_01jd0000000000000000ab", listener_id: webhook.id },
      { emitter_id: source.id, listener_id: "wh_01jd0000000000000000ab" },
      // Ids shaped like the hosted service's are ids too: unknown here, so 404.
      { emitter_id: "dc_abc123", listener_id: webhook.id },
      { emitter_id: "dc_short", listener_id: webhook.id },
      { emitter_id: source.id, listener_id: "wh_Xy-9_z" },
      { emitter_id: source.id, listener_id: "dc_MOCn3Ez" },
    ];
    for (const attempt of attempts) {
      const error = await rejection(createSubscription(deps, owner, attempt));
      expect(error.code, JSON.stringify(attempt)).toBe("not_found");
    }
    expect((await storedSubscriptions(deps, owner)).length).toBe(0);
  });
});

describe("deleteSubscription", () => {
  it("removes the subscription named by the parameters of its creation", async () => {
    const { deps, owner, source, webhook } = await setUp();
    const kept = await createSubscription(deps, owner, {
      emitter_id: source.id,
      listener_id: webhook.id,
      event_name: "x",
    });
    const gone = await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id });
    const answer = await deleteSubscription(deps, owner, {
      emitter_id: source.id,
      listener_id: webhook.id,
      event_name: "",
    });
    expect(answer).toEqual({ id: gone.id, deleted: true });
    expect((await storedSubscriptions(deps, owner)).map((s) => s.id)).toEqual([kept.id]);
  });

  it("removes a glob subscription of the caller", async () => {
    const { deps, owner, webhook } = await setUp();
    await createSubscription(deps, owner, { emitter_id: "dc_*", listener_id: webhook.id, event_name: "$logs" });
    await deleteSubscription(deps, owner, { emitter_id: "dc_*", listener_id: webhook.id, event_name: "$logs" });
    expect((await storedSubscriptions(deps, owner)).length).toBe(0);
  });

  it("answers 404 when there is no such subscription, including on another channel", async () => {
    const { deps, owner, source, webhook } = await setUp();
    await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id, event_name: "orders" });
    const missing = await rejection(
      deleteSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id }),
    );
    expect(missing.code).toBe("not_found");
    expect(missing.message).toBe("subscription not found");
    await deleteSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id, event_name: "orders" });
    const again = await rejection(
      deleteSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id, event_name: "orders" }),
    );
    expect(again.code).toBe("not_found");
  });

  it("answers 404 to another account and leaves the subscription in place", async () => {
    const { deps, owner, stranger, source, webhook } = await setUp();
    await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id });
    const error = await rejection(
      deleteSubscription(deps, stranger, { emitter_id: source.id, listener_id: webhook.id }),
    );
    expect(error.code).toBe("not_found");
    expect((await storedSubscriptions(deps, owner)).length).toBe(1);
  });

  it("lets a member of the workspace it is listed under delete a subscription another member made", async () => {
    const { deps, owner, stranger, ownerWorkspace, source, webhook } = await setUp();
    const created = await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id });
    // No use case adds a member to a workspace yet: this identity store says the stranger is one.
    const identity: IdentityStore = Object.create(deps.identity);
    identity.getMembership = async (workspaceId, userId) =>
      workspaceId === ownerWorkspace && userId === stranger.userId
        ? { workspaceId, userId, role: "member", createdAt: 0 }
        : deps.identity.getMembership(workspaceId, userId);
    const answer = await deleteSubscription({ ...deps, identity }, stranger, {
      emitter_id: source.id,
      listener_id: webhook.id,
    });
    expect(answer).toEqual({ id: created.id, deleted: true });
    expect(await storedSubscriptions(deps, owner)).toEqual([]);
  });

  it("validates its parameters like creation", async () => {
    const { deps, owner, webhook } = await setUp();
    const error = await rejection(
      deleteSubscription(deps, owner, { emitter_id: "dc_*", listener_id: webhook.id, event_name: "$nope" }),
    );
    expect(error.issues?.[0]?.field).toBe("event_name");
    const noEmitter = await rejection(deleteSubscription(deps, owner, { listener_id: webhook.id }));
    expect(noEmitter.issues?.[0]?.field).toBe("emitter_id");
  });
});

/** A list answered as a page (asked for with a `PageQuery`), with its `page_info`. */
function paged<T extends { data: unknown[] }>(list: T | (T & { page_info: PageInfo })) {
  if (!("page_info" in list)) throw new Error("expected a page with page_info");
  return list;
}

describe("listing subscriptions", () => {
  it("pages through the caller's subscriptions, newest first, without the stranger's", async () => {
    const { deps, owner, stranger, source, webhook, strangerSource, strangerWebhook } = await setUp();
    const ids: string[] = [];
    for (const [n, event_name] of ["a", "b", "c"].entries()) {
      deps.clock.set(Date.UTC(2026, 10, 20, 13, n));
      ids.push(
        (await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id, event_name })).id,
      );
    }
    await createSubscription(deps, stranger, { emitter_id: strangerSource.id, listener_id: strangerWebhook.id });

    const first = paged(await listUserSubscriptions(deps, owner, { limit: 2 }));
    expect(first.page_info).toMatchObject({ total_count: 3, count: 2 });
    expect(first.data.map((s) => s.id)).toEqual([ids[2], ids[1]]);
    const second = await listUserSubscriptions(deps, owner, {
      limit: 2,
      after: decodeCursor(first.page_info.end_cursor!, "after"),
    });
    expect(second.data.map((s) => s.id)).toEqual([ids[0]]);
    expect(paged(await listUserSubscriptions(deps, stranger, { limit: 10 })).page_info.total_count).toBe(1);
  });

  it("answers every subscription as {data} when no pagination parameter is given, as the spec shows", async () => {
    const { deps, owner, ownerWorkspace, source, webhook } = await setUp();
    const ids: string[] = [];
    for (let n = 0; n < 150; n++) {
      deps.clock.set(Date.UTC(2026, 10, 20, 13, 0, n));
      ids.push(
        (await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id, event_name: `c${n}` }))
          .id,
      );
    }
    const mine = await listUserSubscriptions(deps, owner, undefined);
    expect(Object.keys(mine)).toEqual(["data"]);
    expect(mine.data.map((s) => s.id)).toEqual([...ids].reverse());
    const workspace = await listWorkspaceSubscriptions(deps, owner, ownerWorkspace, undefined);
    expect(Object.keys(workspace)).toEqual(["data"]);
    expect(workspace.data).toHaveLength(150);
  });

  it("refuses to answer more than UNPAGINATED_LIST_MAX subscriptions at once, naming limit", async () => {
    const { deps, owner, ownerWorkspace } = await setUp();
    const subscriptions = Object.create(deps.subscriptions) as Deps["subscriptions"];
    subscriptions.listSubscriptionsOfUser = async (userId, page) => ({
      ...(await deps.subscriptions.listSubscriptionsOfUser(userId, page)),
      totalCount: UNPAGINATED_LIST_MAX + 1,
    });
    subscriptions.listSubscriptionsOfWorkspace = subscriptions.listSubscriptionsOfUser;
    for (const listing of [
      listUserSubscriptions({ ...deps, subscriptions }, owner, undefined),
      listWorkspaceSubscriptions({ ...deps, subscriptions }, owner, ownerWorkspace, undefined),
    ]) {
      const error = await rejection(listing);
      expect(error.code).toBe("validation");
      expect(error.issues?.[0]?.field).toBe("limit");
      expect(error.message).toContain(`${UNPAGINATED_LIST_MAX + 1} subscriptions`);
    }
  });

  it("lists a workspace's subscriptions to its members and answers 404 to others", async () => {
    const { deps, owner, stranger, ownerWorkspace, source, webhook } = await setUp();
    const created = await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id });
    const listed = await listWorkspaceSubscriptions(deps, owner, ownerWorkspace, { limit: 10 });
    expect(listed.data).toEqual([created]);
    expect((await rejection(listWorkspaceSubscriptions(deps, stranger, ownerWorkspace, { limit: 10 }))).code).toBe(
      "not_found",
    );
  });
});

describe("auto subscriptions", () => {
  it("requires event_name $errors or $logs and a well-formed listener", async () => {
    const { deps, owner, webhook } = await setUp();
    for (const event_name of [undefined, "", "orders", "$in"]) {
      const error = await rejection(createAutoSubscription(deps, owner, { event_name, listener_id: webhook.id }));
      expect(error.issues?.[0]?.field, String(event_name)).toBe("event_name");
    }
    for (const listener_id of [undefined, "dc_*", "o_01jd0000000000000000ab"]) {
      const error = await rejection(createAutoSubscription(deps, owner, { event_name: "$errors", listener_id }));
      expect(error.issues?.[0]?.field, String(listener_id)).toBe("listener_id");
    }
  });

  it("answers 404 for another account's listener", async () => {
    const { deps, owner, strangerWebhook } = await setUp();
    const error = await rejection(
      createAutoSubscription(deps, owner, { event_name: "$logs", listener_id: strangerWebhook.id }),
    );
    expect(error.code).toBe("not_found");
  });

  it("subscribes the listener to sources created afterwards, before their deploy hook, and not to older ones", async () => {
    const { deps, seenAtDeploy, owner, source, webhook } = await setUp();
    const auto = await createAutoSubscription(deps, owner, { event_name: "$errors", listener_id: webhook.id });
    expect(auto).toEqual({
      id: expect.stringMatching(/^sub_/),
      listener_id: webhook.id,
      event_name: "$errors",
      created_at: Date.UTC(2026, 10, 20, 12) / 1000,
    });
    const again = await createAutoSubscription(deps, owner, { event_name: "$errors", listener_id: webhook.id });
    expect(again.id).toBe(auto.id);

    const later = await deploySource(deps, owner, { component_code: "later" });
    expect(seenAtDeploy.at(-1)).toEqual([`${webhook.id} $errors`]);
    expect(await deps.subscriptions.findSubscriptions([later.id], "$errors")).toEqual([
      expect.objectContaining({
        emitterId: later.id,
        emitterKind: "source",
        listenerId: webhook.id,
        userId: owner.userId,
      }),
    ]);
    expect(await deps.subscriptions.findSubscriptions([source.id], "$errors")).toEqual([]);
  });

  it("does not subscribe another account's new sources", async () => {
    const { deps, owner, stranger, webhook } = await setUp();
    await createAutoSubscription(deps, owner, { event_name: "$logs", listener_id: webhook.id });
    const theirs = await deploySource(deps, stranger, { component_code: "theirs" });
    expect(await deps.subscriptions.findSubscriptions([theirs.id], "$logs")).toEqual([]);
  });

  it("subscribes the listener to workflows created afterwards, as workflow emitters, not to older ones nor another account's", async () => {
    // A host without hooks: a step's code must describe as an action or code step.
    const deps = memoryDeps(Date.UTC(2026, 10, 20, 12), { host: scriptedHost().host });
    const ownerAccount = await accountIn(deps, "owner");
    const owner = { userId: ownerAccount.user.id };
    const stranger = { userId: (await accountIn(deps, "stranger")).user.id };
    const webhook = await createWebhook(deps, owner, { url: "http://127.0.0.1:9000/in" });
    await deps.workflows.createWorkflow(workflowRecord(ownerAccount, WORKFLOW_ID));
    const step = { steps: [{ namespace: "work", component_code: "a step" }] };
    const before = await createWorkflow(deps, owner, step);
    await createAutoSubscription(deps, owner, { event_name: "$errors", listener_id: webhook.id });
    await createAutoSubscription(deps, owner, { event_name: "$errors", listener_id: WORKFLOW_ID });
    const later = await createWorkflow(deps, owner, step);
    const theirs = await createWorkflow(deps, stranger, step);
    expect(await deps.subscriptions.findSubscriptions([later.id], "$errors")).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          emitterId: later.id,
          emitterKind: "workflow",
          emitterKey: later.id,
          listenerId: webhook.id,
          userId: owner.userId,
        }),
        expect.objectContaining({ emitterId: later.id, emitterKind: "workflow", listenerId: WORKFLOW_ID }),
      ]),
    );
    expect(await deps.subscriptions.findSubscriptions([later.id], "$errors")).toHaveLength(2);
    expect(await deps.subscriptions.findSubscriptions([before.id, theirs.id], "$errors")).toEqual([]);
  });

  it("applyAutoSubscriptions is idempotent for one source", async () => {
    const { deps, owner, source, webhook } = await setUp();
    await createAutoSubscription(deps, owner, { event_name: "$logs", listener_id: webhook.id });
    const first = await applyAutoSubscriptions(deps, { id: source.id, userId: owner.userId });
    const second = await applyAutoSubscriptions(deps, { id: source.id, userId: owner.userId });
    expect(second.map((s) => s.id)).toEqual(first.map((s) => s.id));
    expect(await deps.subscriptions.findSubscriptions([source.id], "$logs")).toHaveLength(1);
  });
});

describe("deleting a source", () => {
  it("removes its subscriptions as emitter and as listener and the auto subscriptions it listens with", async () => {
    const { deps, owner, source, webhook } = await setUp();
    const other = await deploySource(deps, owner, { component_code: "other" });
    await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id });
    await createSubscription(deps, owner, { emitter_id: other.id, listener_id: source.id });
    await createSubscription(deps, owner, { emitter_id: source.id, listener_id: source.id, event_name: "self" });
    const kept = await createSubscription(deps, owner, { emitter_id: other.id, listener_id: webhook.id });
    await createAutoSubscription(deps, owner, { event_name: "$errors", listener_id: source.id });
    const keptAuto = await createAutoSubscription(deps, owner, { event_name: "$errors", listener_id: webhook.id });

    await deleteSource(deps, owner, source.id);
    expect((await storedSubscriptions(deps, owner)).map((s) => s.id)).toEqual([kept.id]);
    expect((await deps.subscriptions.listAutoSubscriptionsOfUser(owner.userId)).map((a) => a.id)).toEqual([
      keptAuto.id,
    ]);
  });
});

describe("subscriptions made while an end is deleted", () => {
  it("removes a subscription made while its source's deletion runs, once the source is gone", async () => {
    const { deps, owner, source, webhook } = await setUp();
    const made: string[] = [];
    const remove = deps.host.remove.bind(deps.host);
    // Between the deletion's first sweep of subscriptions and the removal of the record: the
    // source is still there, so the subscription is made.
    deps.host = {
      ...deps.host,
      remove: async (target) => {
        made.push((await createSubscription(deps, owner, { emitter_id: source.id, listener_id: webhook.id })).id);
        return remove(target);
      },
    };
    await deleteSource(deps, owner, source.id);
    expect(made).toHaveLength(1);
    expect(await storedSubscriptions(deps, owner)).toEqual([]);
  });

  it("undoes a subscription, and answers 404, when an end was deleted after it was checked", async () => {
    const { deps, owner, source, webhook } = await setUp();
    const put = deps.subscriptions.putSubscription.bind(deps.subscriptions);
    let deleteFirst: (() => Promise<void>) | undefined;
    deps.subscriptions.putSubscription = async (subscription) => {
      await deleteFirst?.();
      return put(subscription);
    };
    const other = await createWebhook(deps, owner, { url: "http://127.0.0.1:9002/in" });
    const cases: [() => Promise<void>, string, string][] = [
      [() => deps.subscriptions.deleteWebhook(webhook.id), webhook.id, "webhook not found"],
      [() => deps.sources.deleteSource(source.id), other.id, "source not found"],
    ];
    for (const [remove, listener, message] of cases) {
      deleteFirst = remove;
      const made = createSubscription(deps, owner, { emitter_id: source.id, listener_id: listener });
      expect(await rejection(made)).toMatchObject({ code: "not_found", message });
    }
    expect(await storedSubscriptions(deps, owner)).toEqual([]);
  });

  it("undoes an auto subscription whose listener was deleted after it was checked", async () => {
    const { deps, owner, webhook } = await setUp();
    const put = deps.subscriptions.putAutoSubscription.bind(deps.subscriptions);
    deps.subscriptions.putAutoSubscription = async (auto) => {
      await deps.subscriptions.deleteWebhook(webhook.id);
      return put(auto);
    };
    expect(
      await rejection(createAutoSubscription(deps, owner, { event_name: "$errors", listener_id: webhook.id })),
    ).toMatchObject({ code: "not_found", message: "webhook not found" });
    expect(await deps.subscriptions.listAutoSubscriptionsOfUser(owner.userId)).toEqual([]);
  });
});
