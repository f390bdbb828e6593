import * as z from "zod";
import { ANY_DEPLOY_STEP } from "#core/component-model";
import { ID_BODY_MAX_LENGTH, ID_PREFIXES, idPattern } from "#core/ids";

/** Response and parameter schemas shared by routes; the OpenAPI document is generated from them. */

export const errorSchema = z.object({
  error: z.string(),
  details: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
  request_id: z.string().optional(),
});

/**
 * An id with its prefix (`#core/ids` `idPattern`: the prefix and 1 to 64 of `[A-Za-z0-9_-]`);
 * anything else is a 400 that names the parameter. A regex rather than a refinement, so the
 * OpenAPI document states it (`pattern: "^dc_[A-Za-z0-9_-]{1,64}$"`).
 */
export const idParam = (prefix: string) =>
  z
    .string()
    .max(prefix.length + ID_BODY_MAX_LENGTH, "is too long")
    .regex(
      new RegExp(idPattern(prefix)),
      `must be an id: ${prefix} followed by 1 to ${ID_BODY_MAX_LENGTH} letters, digits, '_' or '-'`,
    );

export const workspaceIdParams = z.object({ workspace_id: idParam(ID_PREFIXES.workspace) });

export const workspaceSchema = z.object({
  id: z.string(),
  orgname: z.string(),
  name: z.string(),
  email: z.string(),
  daily_credits_quota: z.number().int(),
  daily_credits_used: z.number().int(),
  daily_compute_time_quota: z.number().int(),
  daily_compute_time_used: z.number().int(),
  daily_invocations_quota: z.number().int(),
  daily_invocations_used: z.number().int(),
});

export const userSchema = z.object({
  id: z.string(),
  username: z.string(),
  email: z.string(),
  daily_compute_time_quota: z.number().int(),
  daily_compute_time_used: z.number().int(),
  daily_invocations_quota: z.number().int(),
  daily_invocations_used: z.number().int(),
  orgs: z.array(workspaceSchema),
});

export const projectSchema = z.object({
  id: z.string(),
  hid: z.string(),
  name: z.string(),
  repository_id: z.string().nullable(),
  repository_path: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  org_id: z.number().int(),
  exceptions: z.unknown().nullable(),
  allow_support: z.boolean(),
});

export const single = <T extends z.ZodType>(schema: T) => z.object({ data: schema });
export const list = <T extends z.ZodType>(schema: T) => z.object({ data: z.array(schema) });
export const paginated = <T extends z.ZodType>(schema: T) =>
  z.object({
    page_info: z.object({
      total_count: z.number().int(),
      count: z.number().int(),
      start_cursor: z.string().nullable(),
      end_cursor: z.string().nullable(),
    }),
    data: z.array(schema),
  });

export const sourceIdParams = z.object({ id: idParam(ID_PREFIXES.source) });

export const configurablePropSchema = z
  .object({ name: z.string(), type: z.string() })
  .catchall(z.unknown())
  .meta({ description: "A prop of the component, with the attributes its code set" });

export const componentSchema = z.object({
  id: z.string(),
  code: z.string(),
  code_hash: z.string(),
  name: z.string(),
  version: z.string(),
  key: z.string().optional(),
  description: z.string().optional(),
  type: z.literal("action").optional(),
  component_url: z.string().optional(),
  component_entry: z.string().optional().meta({ description: "A multi-file component's entry: the file `code` shows" }),
  component_files: z
    .record(z.string(), z.string())
    .optional()
    .meta({ description: "A multi-file component's files, by relative path" }),
  configurable_props: z.array(configurablePropSchema),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});

export const sourceSchema = z.object({
  id: z.string(),
  user_id: z.string(),
  owner_id: z.string(),
  component_id: z.string(),
  configured_props: z.record(z.string(), z.unknown()),
  active: z.boolean(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
  name: z.string(),
  name_slug: z.string(),
  /**
   * Only while its deploy is in progress, after it failed in the background, or (AWS) while its
   * deletion's `deactivate()` runs in the background (docs/components.md "Deploys in progress").
   */
  deploy_state: z.enum(["deploying", "failed", "deleting"]).optional(),
  /**
   * While deploying or updating in the background: the step it is at (`prepare`, `deploy`,
   * `activate`; an update's `deactivate`).
   */
  deploy_step: z.enum(ANY_DEPLOY_STEP).optional(),
  /** With `deploy_state: "failed"`: why. */
  deploy_error: z.string().optional(),
});

export const eventSummarySchema = z.object({
  id: z.string(),
  indexed_at_ms: z.number().int(),
  event: z.unknown(),
  metadata: z.object({ emitter_id: z.string(), emit_id: z.string(), name: z.string() }).catchall(z.unknown()),
});

/**
 * A multi-file component (`#core/component-files`, which checks paths and bounds): its files by
 * relative path, and the entry among them.
 */
export const componentFilesFields = {
  component_files: z.record(z.string().max(1024), z.string()).optional().meta({
    description:
      "A multi-file component: relative path -> file text (.mjs, .js, .cjs, .ts, .json); relative imports resolve among these files only",
  }),
  component_entry: z
    .string()
    .max(1024)
    .optional()
    .meta({ description: "The entry file of component_files (optional when it holds one file)" }),
};

/** A source's name, as a create or update body gives it. */
export const sourceNameField = z.string().min(1).max(200).optional();

/** Body fields that choose a component, shared by create and update (spec precedence applies). */
export const componentChoiceFields = {
  component_id: z.string().max(128).optional(),
  component_code: z.string().optional(),
  ...componentFilesFields,
  component_url: z.string().max(2048).optional(),
  key: z.string().max(128).optional(),
};

/**
 * `org_id` and `workspace_id` of a create (`#core/accounts` `WorkspaceChoice`): the workspace the
 * new resource belongs to, in the query string or the body. Unknown or not the caller's: 404.
 */
export const workspaceChoiceFields = {
  org_id: idParam(ID_PREFIXES.workspace)
    .optional()
    .meta({ description: "Workspace to create in (default: the caller's first); 404 when it is not the caller's" }),
  workspace_id: idParam(ID_PREFIXES.workspace)
    .optional()
    .meta({ description: "The same as org_id; when both are given they must agree" }),
};

/** The workspace fields of a create from its query string and body (a field in both must agree). */
export const workspaceChoiceQuery = z.object(workspaceChoiceFields);

/** The answer of a DELETE that removed a resource: `{id, deleted: true}`. */
export const deletedSchema = z.object({ id: z.string(), deleted: z.literal(true) });
