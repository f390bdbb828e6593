import { z } from "zod";
import { ID_PREFIXES } from "#core/ids";

/** Response and parameter schemas shared by routes; the OpenAPI document is generated from them. */

export const errorSchema = z.object({
  error: z.string(),
  details: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
  request_id: z.string().optional(),
});

/** A path id with its prefix; anything else is a 400 that names the parameter. */
export const idParam = (prefix: string) =>
  z
    .string()
    .max(64, "is too long")
    .refine((value) => value.startsWith(prefix), `must be an id starting with ${prefix}`);

export const workspaceIdParams = z.object({ workspace_id: idParam(ID_PREFIXES.workspace) });

export const workspaceSchema = z.object({
  id: z.string(),
  orgname: z.string(),
  name: z.string(),
  email: z.string(),
  daily_credits_quota: z.number().int(),
  daily_credits_used: z.number().int(),
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
