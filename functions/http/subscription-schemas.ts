import * as z from "zod";
import { CHANNEL_NAME_MAX_LENGTH } from "#core/channels";
import { invalid } from "#core/errors";
import { ID_PREFIXES } from "#core/ids";
import { WEBHOOK_DESCRIPTION_MAX_LENGTH, WEBHOOK_NAME_MAX_LENGTH, WEBHOOK_URL_MAX_LENGTH } from "#core/webhooks";
import { idParam, list, paginated } from "./schemas.ts";

/**
 * Schemas of the webhook and subscription routes. The spec passes their parameters in the query
 * string (`POST /subscriptions?emitter_id=...`); a JSON body with the same fields is accepted too.
 * Values are checked by the use cases (so a 400 names the field whichever way it came).
 */

const text = (description: string) => z.string().optional().meta({ description });

export const webhookFields = z.object({
  url: text(
    `Delivery URL: http:// or https://, a hostname, optionally a port, a path and a query; at most ${WEBHOOK_URL_MAX_LENGTH} characters (required)`,
  ),
  name: text(`Shown when listing (at most ${WEBHOOK_NAME_MAX_LENGTH} characters)`),
  description: text(`Shown when listing (at most ${WEBHOOK_DESCRIPTION_MAX_LENGTH} characters)`),
  org_id: text("Workspace to record the webhook under (default: the caller's first); 404 when it is not the caller's"),
  workspace_id: text("The same as org_id (the spec's common parameter); when both are given they must agree"),
});

export const subscriptionFields = z.object({
  emitter_id: text(
    "A source id (dc_), a workflow id (p_), dc_* (all the caller's sources), p_* (all their workflows) or a workspace id (o_, with event_name=$errors only)",
  ),
  listener_id: text("A webhook id (wh_), a source id (dc_) or a workflow id (p_)"),
  event_name: text(
    `Channel: omitted, empty or \`default\` for the default channel; a custom name (at most ${CHANNEL_NAME_MAX_LENGTH} characters); $errors or $logs`,
  ),
  org_id: text(
    "The workspace the subscription is listed under: chosen for a workflow listener (default: the caller's first); a webhook's or source's own otherwise, which it must then be",
  ),
  workspace_id: text("The same as org_id (the spec's common parameter); when both are given they must agree"),
});

export const autoSubscriptionFields = z.object({
  event_name: text("$errors or $logs (required)"),
  listener_id: text("A webhook id (wh_), a source id (dc_) or a workflow id (p_) (required)"),
  org_id: text(
    "The workspace the auto subscription is listed under: chosen for a workflow listener (default: the caller's first); a webhook's or source's own otherwise, which it must then be",
  ),
  workspace_id: text("The same as org_id (the spec's common parameter); when both are given they must agree"),
});

/**
 * The fields of a request from its query string and its JSON body; a field given in both must
 * have the same value in both (400 naming it otherwise).
 */
export function queryOrBody<T extends Record<string, string | undefined>>(query: T, body: T): T {
  const merged: Record<string, string | undefined> = { ...body };
  for (const [field, value] of Object.entries(query)) {
    if (value === undefined) continue;
    if (merged[field] !== undefined && merged[field] !== value) {
      throw invalid(field, "is given in the query string and in the body with different values");
    }
    merged[field] = value;
  }
  return merged as T;
}

export const webhookIdParams = z.object({ id: idParam(ID_PREFIXES.webhook) });

export const webhookSchema = z.object({
  id: z.string().meta({ description: "wh_ id" }),
  user_id: z.string(),
  name: z.string().nullable(),
  description: z.string().nullable(),
  url: z.string(),
  active: z.boolean().meta({ description: "Always true: no endpoint deactivates a webhook" }),
  created_at: z.number().int().meta({ description: "Epoch seconds" }),
  updated_at: z.number().int().meta({ description: "Epoch seconds; changes when the secret is rotated" }),
});

export const webhookWithSecretSchema = webhookSchema.extend({
  signing_secret: z.string().meta({
    description:
      "whsec_ secret that signs deliveries (HMAC-SHA256). Shown only in the answer of creation and rotation: store it",
  }),
});

export const subscriptionSchema = z.object({
  id: z.string().meta({ description: "sub_ id" }),
  emitter_id: z.string().meta({ description: "As given on creation: an id, dc_*, p_* or o_..." }),
  listener_id: z.string(),
  event_name: z.string().meta({ description: "Channel; empty string for the default channel" }),
  created_at: z.number().int().meta({ description: "Epoch seconds" }),
});

/** A list of subscriptions: all of them (`{data}`, as the spec shows it) or, when asked for, a page. */
export const subscriptionListSchema = z.union([list(subscriptionSchema), paginated(subscriptionSchema)]);

export const autoSubscriptionSchema = z.object({
  id: z.string().meta({ description: "sub_ id" }),
  listener_id: z.string(),
  event_name: z.enum(["$errors", "$logs"]),
  created_at: z.number().int().meta({ description: "Epoch seconds" }),
});
