import { describe, expect, it } from "vitest";
import { createComponent } from "#core/components";
import type { IdentityStore } from "#core/ports/identity-store";
import { deploySource } from "#core/sources";
import { createAutoSubscription, createSubscription } from "#core/subscriptions";
import { createWebhook } from "#core/webhooks";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";
import { rejection } from "../../support/rejection.ts";
import { workflowRecord } from "../../support/workflow-record.ts";

/**
 * Issue 12, item 13: every create honours the workspace it names with `org_id` (the spec's word)
 * or `workspace_id`; one that does not exist or is another account's is 404, never a silent
 * fallback to the caller's first workspace.
 */
async function setUp() {
  const { host } = scriptedHost({ name: "Chooser" });
  const base = memoryDeps(Date.UTC(2026, 10, 20, 12), {
    host,
    timers: { schedule: async () => {}, cancel: async () => {} },
  });
  const mine = await accountIn(base, "mine");
  const theirs = await accountIn(base, "theirs");
  // A second workspace of the caller's. No use case adds a member to a workspace yet: this
  // identity store says the caller is one of another account's workspace.
  const second = await accountIn(base, "second");
  const identity: IdentityStore = Object.create(base.identity);
  identity.getMembership = async (workspaceId, userId) =>
    workspaceId === second.workspace.id && userId === mine.user.id
      ? { workspaceId, userId, role: "member", createdAt: 0 }
      : base.identity.getMembership(workspaceId, userId);
  const deps = { ...base, identity };
  const caller = { userId: mine.user.id };
  const webhook = await createWebhook(deps, caller, { url: "http://127.0.0.1:9000/in" });
  return {
    deps,
    caller,
    own: mine.workspace.id,
    second: second.workspace.id,
    foreign: theirs.workspace.id,
    unknown: "o_MOCn3Ez",
    webhook,
  };
}

describe("the workspace a create names", () => {
  it("deploys a source in the workspace org_id names, from the query or the body", async () => {
    const { deps, caller, second } = await setUp();
    const source = await deploySource(deps, caller, { component_code: "code", org_id: second });
    expect(source.owner_id).toBe(second);
    const same = await deploySource(deps, caller, { component_code: "code", org_id: second, workspace_id: second });
    expect(same.owner_id).toBe(second);
  });

  it("answers 404 for an unknown or foreign org_id on every create, and creates nothing", async () => {
    const { deps, caller, foreign, unknown, webhook } = await setUp();
    for (const org_id of [foreign, unknown]) {
      const attempts = {
        source: deploySource(deps, caller, { component_code: "code", org_id }),
        component: createComponent(deps, caller, { component_code: "code", org_id }),
        webhook: createWebhook(deps, caller, { url: "http://127.0.0.1:9000/in", org_id }),
        subscription: createSubscription(deps, caller, { emitter_id: "dc_*", listener_id: webhook.id, org_id }),
        workflowSubscription: createSubscription(deps, caller, {
          emitter_id: "dc_*",
          listener_id: "p_MOCn3Ez",
          org_id,
        }),
        autoSubscription: createAutoSubscription(deps, caller, {
          event_name: "$errors",
          listener_id: webhook.id,
          org_id,
        }),
      };
      for (const [what, attempt] of Object.entries(attempts)) {
        const error = await rejection(attempt);
        expect([what, org_id, error.code]).toEqual([what, org_id, "not_found"]);
      }
    }
    expect((await deps.sources.listSourcesOfUser(caller.userId, { limit: 10 })).totalCount).toBe(0);
    expect((await deps.subscriptions.listWebhooksOfUser(caller.userId, { limit: 10 })).totalCount).toBe(1);
    expect((await deps.subscriptions.listSubscriptionsOfUser(caller.userId, { limit: 10 })).totalCount).toBe(0);
    expect(await deps.subscriptions.listAutoSubscriptionsOfUser(caller.userId)).toEqual([]);
  });

  it("answers 400 naming the field for a malformed id, or org_id and workspace_id that disagree", async () => {
    const { deps, caller, own, second } = await setUp();
    const malformed = await rejection(deploySource(deps, caller, { component_code: "code", org_id: "dc_abc" }));
    expect(malformed.issues).toEqual([{ field: "org_id", message: "must be a workspace id (o_...)" }]);
    const empty = await rejection(createWebhook(deps, caller, { url: "http://127.0.0.1:1/", workspace_id: "" }));
    expect(empty.issues?.[0]?.field).toBe("workspace_id");
    const disagree = await rejection(
      deploySource(deps, caller, { component_code: "code", org_id: own, workspace_id: second }),
    );
    expect(disagree.issues).toEqual([{ field: "org_id", message: "names another workspace than workspace_id" }]);
  });

  it("records webhooks under the workspace named, and a workflow's subscriptions under the workflow's", async () => {
    const { deps, caller, own, second } = await setUp();
    const webhook = await createWebhook(deps, caller, { url: "http://127.0.0.1:9000/in", org_id: second });
    expect((await deps.subscriptions.getWebhook(webhook.id))?.workspaceId).toBe(second);
    const workflow = {
      ...workflowRecord(await accountIn(deps, "unused"), "p_MOCn3Ez"),
      userId: caller.userId,
      workspaceId: second,
    };
    await deps.workflows.createWorkflow(workflow);
    await createSubscription(deps, caller, { emitter_id: "dc_*", listener_id: "p_MOCn3Ez", org_id: second });
    const listed = await deps.subscriptions.listSubscriptionsOfWorkspace(second, { limit: 10 });
    expect(listed.items.map((s) => s.listenerId)).toEqual(["p_MOCn3Ez"]);
    const error = await rejection(
      createSubscription(deps, caller, { emitter_id: "dc_*", listener_id: "p_MOCn3Ez", event_name: "x", org_id: own }),
    );
    expect(error.issues?.[0]?.field).toBe("org_id");
  });

  it("lists a webhook's subscription under the webhook's workspace: naming another of the caller's is 400", async () => {
    const { deps, caller, own, second, webhook } = await setUp();
    const error = await rejection(
      createSubscription(deps, caller, { emitter_id: "dc_*", listener_id: webhook.id, org_id: second }),
    );
    expect(error.issues?.[0]?.field).toBe("org_id");
    const created = await createSubscription(deps, caller, {
      emitter_id: "dc_*",
      listener_id: webhook.id,
      org_id: own,
    });
    expect(created.listener_id).toBe(webhook.id);
  });
});
