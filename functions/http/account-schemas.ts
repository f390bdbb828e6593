import * as z from "zod";
import { ID_PREFIXES } from "#core/ids";
import { decodeCursor, PAGE_LIMIT_DEFAULT, pageParamsSchema } from "#core/pagination";
import { idParam } from "./schemas.ts";

/** Schemas of the app catalog and connected accounts routes (docs/accounts.md "Routes"). */

export const accountIdParams = z.object({ id: idParam(ID_PREFIXES.account) });

/** An `app_` id or a `name_slug`. */
export const appRef = z.string().min(1).max(128);

export const appIdParams = z.object({ id: appRef.meta({ description: "An app_ id or a name_slug" }) });

export const appSchema = z.object({
  id: z.string(),
  name_slug: z.string(),
  name: z.string(),
  auth_type: z.enum(["keys", "oauth", "none"]),
  fields: z.array(z.string()),
  required_fields: z.array(z.string()).meta({ description: "Fields POST /v1/accounts requires (key apps)" }),
  oauth_scopes: z.array(z.string()).optional(),
  has_test_request: z.boolean(),
});

export const accountSchema = z.object({
  id: z.string(),
  name: z.string(),
  app: z.object({ id: z.string(), name: z.string() }),
  created_at: z.string(),
  updated_at: z.string(),
  healthy: z.boolean(),
  expires_at: z.string().nullable().optional().meta({ description: "Only with include_credentials=1" }),
  credentials: z
    .record(z.string(), z.unknown())
    .optional()
    .meta({ description: "Only with include_credentials=1: the app's fields, or the oauth_* fields" }),
});

export const accountItemSchema = z.object({ id: z.string(), name: z.string() });

/** A credential value as `$auth` carries it. */
const credentialValue = z.union([z.string(), z.number(), z.boolean()], {
  error: "must be a string, a number or a boolean",
});

/**
 * `z.record` copies by assignment, which drops a `__proto__` key silently (decision 112): it is
 * refused first, as any other key that is no field of the app.
 */
export const credentialsField = z
  .preprocess(
    (value, ctx) => {
      if (typeof value === "object" && value !== null && Object.hasOwn(value, "__proto__")) {
        ctx.addIssue({ code: "custom", path: ["__proto__"], message: "is not a field of any app", input: value });
      }
      return value;
    },
    z.record(z.string().max(64), credentialValue),
  )
  .meta({ description: "The app's fields (GET /v1/apps/{id} lists them): field -> value" });

export const accountNameField = z.string().max(200).meta({ description: "Default: the app's name" });

/** Accounts and apps are listed forward only (by id, by slug): `after` the last cursor of a page. */
export const forwardPageParams = pageParamsSchema.pick({ limit: true, after: true });

/** `query`, the spec's filter of a workspace's accounts by app, an app_ id or name_slug. */
export const accountListQuery = forwardPageParams
  .extend({ query: appRef.optional().meta({ description: "Only the accounts of this app (app_ id or name_slug)" }) })
  .strict();

/** The store page of a validated {@link accountListQuery}. */
export const accountPageOf = (query: z.infer<typeof accountListQuery>) => ({
  limit: query.limit ?? PAGE_LIMIT_DEFAULT,
  after: query.after === undefined ? undefined : decodeCursor(query.after, "after"),
  app: query.query,
});
