/**
 * Webhooks (`wh_`, rest-api.md "Webhooks"): URLs a user owns that receive events through
 * subscriptions. Each has a signing secret, sealed at rest, shown in clear only in the answer
 * that made it (creation or rotation). A webhook belongs to the user who made it; anyone else
 * gets 404, exactly as for a webhook that does not exist.
 */

import type { Deps } from "#core/ports/deps";
import { requireWebhook } from "./access.ts";
import { type WorkspaceChoice, workspaceOrDefault } from "./accounts.ts";
import { invalid } from "./errors.ts";
import type { Caller } from "./identity.ts";
import { requireDisplayableName } from "./names.ts";
import { type PageQuery, pageEnvelope } from "./pagination.ts";
import type { WebhookRecord } from "./subscription-model.ts";
import { forgetSubscriptionsOf } from "./subscriptions.ts";
import { epochSeconds } from "./time.ts";

type WebhookDeps = Pick<Deps, "subscriptions" | "identity" | "secrets" | "clock" | "ids" | "runtime">;

export const WEBHOOK_URL_MAX_LENGTH = 2048;
export const WEBHOOK_NAME_MAX_LENGTH = 200;
export const WEBHOOK_DESCRIPTION_MAX_LENGTH = 1000;
/** Marks the secret as a webhook signing secret in logs and secret scanners. */
const SIGNING_SECRET_PREFIX = "whsec_";
const SIGNING_SECRET_BYTES = 32;

export interface CreateWebhookInput extends WorkspaceChoice {
  url?: string | undefined;
  name?: string | undefined;
  description?: string | undefined;
}

// Control characters and whitespace: a URL with them is either a typo or an attempt at header
// injection once it reaches an HTTP client.
const FORBIDDEN_IN_URL = /[\s\p{Cc}]/u;

/**
 * The spec's rule: `http` or `https`, a hostname, optionally a port and a path. Also refused:
 * credentials (`user:pass@`, they would sit in clear in every listing), a fragment (never sent to
 * the server), port 0, whitespace, control characters and backslashes. A query string is allowed: receivers
 * often authenticate with a token in it. The URL is stored as given.
 */
function validateWebhookUrl(url: string | undefined, publicUrl: string): string {
  if (url === undefined || url === "") throw invalid("url", "is required");
  if (url.length > WEBHOOK_URL_MAX_LENGTH) throw invalid("url", `must be at most ${WEBHOOK_URL_MAX_LENGTH} characters`);
  if (FORBIDDEN_IN_URL.test(url)) throw invalid("url", "must not contain spaces or control characters");
  // Read as `/` by WHATWG parsers (Sluice's) but not by every tool that reads the stored URL:
  // `http://127.0.0.1\@evil/` is 127.0.0.1 here and `evil` elsewhere.
  if (url.includes("\\")) throw invalid("url", "must not contain a backslash (write / in a path, %5C in a query)");
  // WHATWG parsing forgives `http:host` and `http:///host`; the spec wants the protocol written out.
  if (!/^https?:\/\/[^/?#]/i.test(url)) {
    throw invalid("url", "must start with http:// or https:// followed by a hostname");
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid("url", "is not a valid URL");
  }
  if (parsed.hostname === "") throw invalid("url", "must have a hostname");
  if (parsed.username !== "" || parsed.password !== "") {
    throw invalid("url", "must not contain credentials (user:password@)");
  }
  if (parsed.port === "0") throw invalid("url", "must not use port 0");
  if (url.includes("#")) throw invalid("url", "must not contain a fragment (#...)");
  if (isSourceEndpoint(parsed, publicUrl)) {
    throw invalid(
      "url",
      `is a source endpoint of this Sluice (${publicUrl}/http/...): every delivery would run that source, whose events would be delivered again (a loop); to send one source's events to another, subscribe it (listener_id=dc_...)`,
    );
  }
  return url;
}

/**
 * Whether `url` is one of this service's own HTTP interface endpoints (`<public URL>/http/...`),
 * as far as the URL shows: the same scheme, host and port (URL parsing normalises case and
 * default ports) and a path under `/http/`. Another name of the same host (`localhost` for
 * `127.0.0.1`) is not seen here; hop counting (`#core/hops`) stops such a loop instead.
 */
function isSourceEndpoint(url: URL, publicUrl: string): boolean {
  let base: URL;
  try {
    base = new URL(publicUrl);
  } catch {
    return false;
  }
  if (url.protocol !== base.protocol || url.host !== base.host) return false;
  return url.pathname.startsWith(`${base.pathname.replace(/\/+$/, "")}/http/`);
}

function optionalText(field: string, value: string | undefined, max: number): string {
  if (value === undefined) return "";
  if (value.length > max) throw invalid(field, `must be at most ${max} characters`);
  requireDisplayableName(field, value);
  if (/\p{Cc}/u.test(value.replace(/[\n\t]/g, ""))) throw invalid(field, "must not contain control characters");
  return value;
}

/**
 * A new signing secret: in clear (shown once) and sealed (stored). The random bytes are written
 * in standard base64 (with `+`, `/` and padding), the form Standard Webhooks libraries decode
 * after `whsec_`; secrets made before were base64url, which those libraries refuse (Sluice signs
 * with the same bytes either way: docs/webhooks.md).
 */
async function newSigningSecret(deps: Pick<Deps, "secrets" | "ids">) {
  const random = Buffer.from(deps.ids.newSecret(SIGNING_SECRET_BYTES), "base64url").toString("base64");
  const secret = `${SIGNING_SECRET_PREFIX}${random}`;
  return { secret, sealed: await deps.secrets.seal(secret) };
}

/** `POST /webhooks`: answers the webhook with its `signing_secret`, the only time it is shown. */
export async function createWebhook(deps: WebhookDeps, caller: Caller, input: CreateWebhookInput) {
  const url = validateWebhookUrl(input.url, deps.runtime.publicUrl);
  const name = optionalText("name", input.name, WEBHOOK_NAME_MAX_LENGTH);
  const description = optionalText("description", input.description, WEBHOOK_DESCRIPTION_MAX_LENGTH);
  const workspace = await workspaceOrDefault(deps, caller, input);
  const { secret, sealed } = await newSigningSecret(deps);
  const now = deps.clock.nowMs();
  const webhook: WebhookRecord = {
    id: deps.ids.newId("webhook"),
    userId: caller.userId,
    workspaceId: workspace.id,
    url,
    name,
    description,
    sealedSigningSecret: sealed,
    createdAt: now,
    updatedAt: now,
  };
  await deps.subscriptions.createWebhook(webhook);
  return { ...webhookView(webhook), signing_secret: secret };
}

/** `GET /webhooks/{id}`: without the secret. */
export async function getWebhook(deps: Pick<Deps, "subscriptions">, caller: Caller, id: string) {
  return webhookView(await requireWebhook(deps, caller, id));
}

/** `GET /users/me/webhooks`: the caller's webhooks, newest first. */
export async function listWebhooks(deps: Pick<Deps, "subscriptions">, caller: Caller, page: PageQuery) {
  return pageEnvelope(await deps.subscriptions.listWebhooksOfUser(caller.userId, page), (w) => w.id, webhookView, page);
}

/**
 * `POST /webhooks/{id}/rotate_secret`: a new secret replaces the old one at once; every delivery
 * attempted from now on (retries and replays included) is signed with it. Shown once.
 */
export async function rotateWebhookSecret(deps: WebhookDeps, caller: Caller, id: string) {
  const current = await requireWebhook(deps, caller, id);
  const { secret, sealed } = await newSigningSecret(deps);
  const rotated: WebhookRecord = { ...current, sealedSigningSecret: sealed, updatedAt: deps.clock.nowMs() };
  await deps.subscriptions.updateWebhook(rotated);
  return { ...webhookView(rotated), signing_secret: secret };
}

/**
 * `DELETE /webhooks/{id}`: its subscriptions, auto subscriptions and dead letters go first, the
 * webhook last, so a failure half way leaves it in place and repeating the call finishes the job;
 * then its subscriptions and dead letters again, for one made meanwhile ({@link forgetSubscriptionsOf},
 * `attemptDelivery`).
 */
export async function deleteWebhook(deps: Pick<Deps, "subscriptions" | "deadLetters">, caller: Caller, id: string) {
  const webhook = await requireWebhook(deps, caller, id);
  await forgetSubscriptionsOf(deps, webhook.id);
  await deps.deadLetters.deleteDeadLettersOf(webhook.id);
  await deps.subscriptions.deleteWebhook(webhook.id);
  await forgetSubscriptionsOf(deps, webhook.id);
  await deps.deadLetters.deleteDeadLettersOf(webhook.id);
  return { id: webhook.id, deleted: true as const };
}

/**
 * The clear signing secret, for the delivery worker only (never for an API answer after creation).
 * Throws when the sealed secret was tampered with or sealed under another key.
 */
export async function openSigningSecret(deps: Pick<Deps, "secrets">, webhook: WebhookRecord): Promise<string> {
  return deps.secrets.open(webhook.sealedSigningSecret);
}

/**
 * The Webhook resource of the spec. `name` and `description` are null when not given; `active` is
 * always true (the spec names no transition for it).
 */
function webhookView(webhook: WebhookRecord) {
  return {
    id: webhook.id,
    user_id: webhook.userId,
    name: webhook.name === "" ? null : webhook.name,
    description: webhook.description === "" ? null : webhook.description,
    url: webhook.url,
    active: true,
    created_at: epochSeconds(webhook.createdAt),
    updated_at: epochSeconds(webhook.updatedAt),
  };
}
