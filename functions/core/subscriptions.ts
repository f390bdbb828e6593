/**
 * Subscriptions (`sub_`) and auto subscriptions (rest-api.md "Subscriptions", "Events"): which
 * listener receives which emitter's channel. A caller subscribes only with what they can reach:
 * sources and workflows of their workspaces, their own webhooks, their workspaces; anything else
 * is 404 exactly like a missing id. A malformed id is 400 naming the parameter, checked before any
 * lookup.
 */

import type { Deps } from "#core/ports/deps";
import { requireSource, requireWebhook, requireWorkflow, requireWorkspace } from "./access.ts";
import { chosenWorkspace, type WorkspaceChoice } from "./accounts.ts";
import { requireChannelName } from "./channels.ts";
import { ERRORS_CHANNEL, LOGS_CHANNEL, type SourceRecord } from "./component-model.ts";
import { invalid, notFound } from "./errors.ts";
import type { Caller } from "./identity.ts";
import { ID_MAX_LENGTH, isId } from "./ids.ts";
import { requireDisplayableName } from "./names.ts";
import { type Page, type PageQuery, pageEnvelope, readWholeList, UNPAGINATED_LIST_MAX } from "./pagination.ts";
import {
  type AutoSubscriptionRecord,
  type EmitterKind,
  globEmitterKey,
  type ListenerKind,
  SOURCES_GLOB,
  type SubscriptionRecord,
  WORKFLOWS_GLOB,
} from "./subscription-model.ts";
import { epochSeconds } from "./time.ts";
import type { WorkflowRecord } from "./workflow-model.ts";

type SubscriptionDeps = Pick<Deps, "subscriptions" | "sources" | "workflows" | "identity" | "clock" | "ids">;

/** The reserved channels a subscription may name; any other `$` name is refused. */
const RESERVED_CHANNELS: readonly string[] = [ERRORS_CHANNEL, LOGS_CHANNEL];

/**
 * `org_id` / `workspace_id`: the workspace the subscription is listed under. For a workflow
 * listener it chooses it (default: the caller's first); a webhook or source listener is listed
 * under its own workspace, which the one named must then be.
 */
export interface SubscriptionInput extends WorkspaceChoice {
  emitter_id?: string | undefined;
  listener_id?: string | undefined;
  event_name?: string | undefined;
}

export interface AutoSubscriptionInput extends WorkspaceChoice {
  event_name?: string | undefined;
  listener_id?: string | undefined;
}

interface Emitter {
  id: string;
  kind: EmitterKind;
  key: string;
}

interface Listener {
  id: string;
  kind: ListenerKind;
}

/**
 * The channel a subscription names. Omitted, empty or `default` is the default channel `""` (as
 * in `GET /sources/{id}/event_summaries?event_name=default`); `$errors` and `$logs` are the
 * reserved streams; any other name starting with `$` is refused.
 */
function channelOf(eventName: string | undefined): string {
  const channel = requireChannelName(requireDisplayableName("event_name", eventName ?? ""));
  if (channel.startsWith("$") && !RESERVED_CHANNELS.includes(channel)) {
    throw invalid("event_name", `names no channel: the reserved channels are ${RESERVED_CHANNELS.join(" and ")}`);
  }
  return channel;
}

function requiredId(field: string, value: string | undefined): string {
  if (value === undefined || value === "") throw invalid(field, "is required");
  if (value.length > ID_MAX_LENGTH) throw invalid(field, "is not a valid id");
  return value;
}

/** Parses `emitter_id` without looking anything up; globs are keyed by the subscribing user. */
function parseEmitter(caller: Caller, value: string | undefined): Emitter {
  const id = requiredId("emitter_id", value);
  if (id === SOURCES_GLOB) return { id, kind: "sources-glob", key: globEmitterKey(id, caller.userId) };
  if (id === WORKFLOWS_GLOB) return { id, kind: "workflows-glob", key: globEmitterKey(id, caller.userId) };
  if (isId("source", id)) return { id, kind: "source", key: id };
  if (isId("workflow", id)) return { id, kind: "workflow", key: id };
  if (isId("workspace", id)) return { id, kind: "workspace", key: id };
  throw invalid(
    "emitter_id",
    "must be a source id (dc_...), a workflow id (p_...), dc_*, p_* or a workspace id (o_...)",
  );
}

function parseListener(value: string | undefined): Listener {
  const id = requiredId("listener_id", value);
  if (isId("webhook", id)) return { id, kind: "webhook" };
  if (isId("source", id)) return { id, kind: "source" };
  if (isId("workflow", id)) return { id, kind: "workflow" };
  throw invalid("listener_id", "must be a webhook id (wh_...), a source id (dc_...) or a workflow id (p_...)");
}

/** Every check that needs no lookup, so a malformed request is 400 whatever it names. */
function parseSubscription(caller: Caller, input: SubscriptionInput) {
  const emitter = parseEmitter(caller, input.emitter_id);
  const listener = parseListener(input.listener_id);
  const eventName = channelOf(input.event_name);
  if (emitter.kind === "workspace" && eventName !== ERRORS_CHANNEL) {
    throw invalid("event_name", `must be ${ERRORS_CHANNEL} when emitter_id is a workspace`);
  }
  chosenWorkspace(input);
  return { emitter, listener, eventName };
}

/** Checks the caller can reach the emitter (404 otherwise). */
async function checkEmitter(deps: SubscriptionDeps, caller: Caller, emitter: Emitter): Promise<void> {
  if (emitter.kind === "source") await requireSource(deps, caller, emitter.id);
  if (emitter.kind === "workflow") await requireWorkflow(deps, caller, emitter.id);
  if (emitter.kind === "workspace") await requireWorkspace(deps, caller, emitter.id);
}

/**
 * Checks the caller can reach the listener (404 otherwise); answers the workspace it is listed
 * under: the listener's own, which a workspace named in `choice` must be (404 when it is not the
 * caller's, 400 when it is another of theirs).
 */
async function listenerWorkspace(
  deps: SubscriptionDeps,
  caller: Caller,
  listener: Listener,
  choice: WorkspaceChoice,
): Promise<string> {
  const owned =
    listener.kind === "webhook"
      ? (await requireWebhook(deps, caller, listener.id)).workspaceId
      : listener.kind === "workflow"
        ? (await requireWorkflow(deps, caller, listener.id)).workspaceId
        : (await requireSource(deps, caller, listener.id)).workspaceId;
  const chosen = chosenWorkspace(choice);
  if (chosen !== undefined && (await requireWorkspace(deps, caller, chosen.id)).id !== owned) {
    throw invalid(chosen.field, `must be the listener's workspace (${owned}), which the subscription is listed under`);
  }
  return owned;
}

/**
 * `POST /subscriptions`: events of `emitter_id`'s channel `event_name` go to `listener_id`. A
 * source may listen to itself (its run receives its own emits on that channel). Subscribing twice
 * answers the first subscription: the store keeps one per (emitter, listener, channel).
 */
export async function createSubscription(deps: SubscriptionDeps, caller: Caller, input: SubscriptionInput) {
  const { emitter, listener, eventName } = parseSubscription(caller, input);
  await checkEmitter(deps, caller, emitter);
  const workspaceId = await listenerWorkspace(deps, caller, listener, input);
  const stored = await deps.subscriptions.putSubscription({
    id: deps.ids.newId("subscription"),
    userId: caller.userId,
    workspaceId,
    emitterId: emitter.id,
    emitterKind: emitter.kind,
    emitterKey: emitter.key,
    listenerId: listener.id,
    listenerKind: listener.kind,
    eventName,
    createdAt: deps.clock.nowMs(),
  });
  // The store keeps one subscription per (emitter, listener, channel) across all tenants. Every id
  // was checked above and globs are keyed by user, so this finds only a subscription made by a
  // member of the listener's workspace; it is answered only to those who may manage it.
  if (!(await mayManage(deps, caller, stored))) throw notFound("subscription");
  // An end deleted since it was checked, whose deletion's last sweep ({@link forgetSubscriptionsOf})
  // may have run before this write: the subscription is undone, as that sweep would have.
  const gone = (await missing(deps, emitter)) ?? (await missing(deps, listener));
  if (gone) {
    await deps.subscriptions.deleteSubscription(stored);
    throw notFound(gone);
  }
  return subscriptionView(stored);
}

/** What kind of thing `end` is when it no longer exists (a source, workflow or webhook). */
async function missing(deps: SubscriptionDeps, end: Emitter | Listener): Promise<string | undefined> {
  if (end.kind === "source") return (await deps.sources.getSource(end.id)) ? undefined : "source";
  if (end.kind === "workflow") return (await deps.workflows.getWorkflow(end.id)) ? undefined : "workflow";
  if (end.kind === "webhook") return (await deps.subscriptions.getWebhook(end.id)) ? undefined : "webhook";
  return undefined;
}

/**
 * Removes the subscriptions naming `id` (as emitter or listener) and its auto subscriptions. A
 * deletion calls it before removing the record, so that a failure half way leaves the resource
 * and a repeat finishes, and again after: a subscription made meanwhile (its request found the
 * resource still there) goes too.
 */
export async function forgetSubscriptionsOf(deps: Pick<Deps, "subscriptions">, id: string): Promise<void> {
  await deps.subscriptions.deleteSubscriptionsOf(id);
  await deps.subscriptions.deleteAutoSubscriptionsOf(id);
}

/**
 * `DELETE /subscriptions` with the parameters of its creation (an empty or omitted `event_name` is
 * the default channel). 404 when there is no such subscription, or the caller neither made it nor
 * belongs to the workspace it is listed under.
 */
export async function deleteSubscription(deps: SubscriptionDeps, caller: Caller, input: SubscriptionInput) {
  const { emitter, listener, eventName } = parseSubscription(caller, input);
  const key = { emitterKey: emitter.key, listenerId: listener.id, eventName };
  const existing = await deps.subscriptions.getSubscription(key);
  if (!existing || !(await mayManage(deps, caller, existing))) throw notFound("subscription");
  const deleted = await deps.subscriptions.deleteSubscription(key);
  if (!deleted) throw notFound("subscription");
  return { id: deleted.id, deleted: true as const };
}

async function mayManage(deps: Pick<Deps, "identity">, caller: Caller, subscription: SubscriptionRecord) {
  if (subscription.userId === caller.userId) return true;
  return (await deps.identity.getMembership(subscription.workspaceId, caller.userId)) !== undefined;
}

/**
 * A list of subscriptions: `{data: [...]}` with all of them when `page` is undefined, as the spec
 * shows these lists (at most {@link UNPAGINATED_LIST_MAX}, else 400); a page with `page_info`
 * when the client asked for one.
 */
async function subscriptionList(
  readPage: (page: PageQuery) => Promise<Page<SubscriptionRecord>>,
  page: PageQuery | undefined,
) {
  if (page !== undefined) return pageEnvelope(await readPage(page), (s) => s.id, subscriptionView, page);
  const all = await readWholeList(readPage, (s) => s.id, "subscriptions");
  return { data: all.map(subscriptionView) };
}

/** `GET /users/me/subscriptions`: the subscriptions the caller made, newest first. */
export async function listUserSubscriptions(
  deps: Pick<Deps, "subscriptions">,
  caller: Caller,
  page: PageQuery | undefined,
) {
  return subscriptionList((query) => deps.subscriptions.listSubscriptionsOfUser(caller.userId, query), page);
}

/** `GET /workspaces/{id}/subscriptions`: those listed under a workspace the caller belongs to. */
export async function listWorkspaceSubscriptions(
  deps: Pick<Deps, "subscriptions" | "identity">,
  caller: Caller,
  workspaceId: string,
  page: PageQuery | undefined,
) {
  const workspace = await requireWorkspace(deps, caller, workspaceId);
  return subscriptionList((query) => deps.subscriptions.listSubscriptionsOfWorkspace(workspace.id, query), page);
}

/**
 * `POST /auto_subscriptions`: the listener is subscribed to `event_name` (`$errors` or `$logs`) of
 * every source and workflow the caller creates from now on. Existing ones are untouched.
 * Creating the same twice answers the first.
 */
export async function createAutoSubscription(deps: SubscriptionDeps, caller: Caller, input: AutoSubscriptionInput) {
  if (input.event_name === undefined || input.event_name === "") throw invalid("event_name", "is required");
  if (!RESERVED_CHANNELS.includes(input.event_name)) {
    throw invalid("event_name", `must be ${RESERVED_CHANNELS.join(" or ")}`);
  }
  const listener = parseListener(input.listener_id);
  chosenWorkspace(input);
  const workspaceId = await listenerWorkspace(deps, caller, listener, input);
  const stored = await deps.subscriptions.putAutoSubscription({
    id: deps.ids.newId("subscription"),
    userId: caller.userId,
    workspaceId,
    eventName: input.event_name,
    listenerId: listener.id,
    listenerKind: listener.kind,
    createdAt: deps.clock.nowMs(),
  });
  const gone = await missing(deps, listener);
  if (gone) {
    await deps.subscriptions.deleteAutoSubscriptionsOf(listener.id);
    throw notFound(gone);
  }
  return autoSubscriptionView(stored);
}

/**
 * Subscribes the listeners of the owner's auto subscriptions to a newly created source or workflow
 * (the spec: "for workflows and sources created after the call"). Called by `deploySource` before
 * the source's hooks run, so what `deploy()` logs or throws reaches them too, and by
 * `createWorkflow` once the workflow is stored, before any of its triggers can start a run. A
 * workflow gets `$logs` subscriptions too, as the spec says; it emits nothing there today.
 */
export async function applyAutoSubscriptions(
  deps: Pick<Deps, "subscriptions" | "clock" | "ids">,
  emitter: Pick<SourceRecord | WorkflowRecord, "id" | "userId">,
): Promise<SubscriptionRecord[]> {
  const autos = await deps.subscriptions.listAutoSubscriptionsOfUser(emitter.userId);
  const emitterKind: EmitterKind = isId("workflow", emitter.id) ? "workflow" : "source";
  const made: SubscriptionRecord[] = [];
  for (const auto of autos) {
    made.push(
      await deps.subscriptions.putSubscription({
        id: deps.ids.newId("subscription"),
        userId: auto.userId,
        workspaceId: auto.workspaceId,
        emitterId: emitter.id,
        emitterKind,
        emitterKey: emitter.id,
        listenerId: auto.listenerId,
        listenerKind: auto.listenerKind,
        eventName: auto.eventName,
        createdAt: deps.clock.nowMs(),
      }),
    );
  }
  return made;
}

export type WorkflowSubscriptionDeps = Pick<Deps, "subscriptions" | "clock">;

/**
 * Subscribes a workflow to the default channel of a source (a source trigger, design 3.6), listed
 * under the workflow's workspace and made by its user. The caller has checked both ends. Answers
 * the stored subscription: an existing one for the same pair, or the new one with `id`.
 */
export async function subscribeWorkflow(
  deps: WorkflowSubscriptionDeps,
  workflow: Pick<WorkflowRecord, "id" | "userId" | "workspaceId">,
  sourceId: string,
  id: string,
): Promise<SubscriptionRecord> {
  return deps.subscriptions.putSubscription({
    id,
    userId: workflow.userId,
    workspaceId: workflow.workspaceId,
    emitterId: sourceId,
    emitterKind: "source",
    emitterKey: sourceId,
    listenerId: workflow.id,
    listenerKind: "workflow",
    eventName: "",
    createdAt: deps.clock.nowMs(),
  });
}

/** The Subscription resource of the spec; `event_name` is `""` for the default channel. */
function subscriptionView(subscription: SubscriptionRecord) {
  return {
    id: subscription.id,
    emitter_id: subscription.emitterId,
    listener_id: subscription.listenerId,
    event_name: subscription.eventName,
    created_at: epochSeconds(subscription.createdAt),
  };
}

function autoSubscriptionView(auto: AutoSubscriptionRecord) {
  return {
    id: auto.id,
    listener_id: auto.listenerId,
    event_name: auto.eventName,
    created_at: epochSeconds(auto.createdAt),
  };
}
