import * as z from "zod";
import { ID_PREFIXES } from "#core/ids";
import { idParam, workspaceChoiceFields } from "./schemas.ts";

/**
 * Bodies and answers of the configure and props endpoints, in the shape of the original's Connect
 * API (SDK `ConfigurePropOpts`, `ReloadPropsOpts`, `ConfigurePropResponse`, `ReloadPropsResponse`).
 */

const dynamicPropsFields = {
  id: z
    .string()
    .min(1)
    .max(128)
    .meta({ description: "A saved component (sc_), your component's key, or a registry key" }),
  configured_props: z.record(z.string(), z.unknown()).optional(),
  dynamic_props_id: z
    .string()
    .max(128)
    .optional()
    .meta({ description: "Accepted; the prop set is recomputed from configured_props" }),
  external_user_id: z.string().max(256).optional().meta({ description: "Accepted for Connect clients; not used" }),
  blocking: z.boolean().optional().meta({ description: "Accepted for Connect clients; answers always block" }),
  ...workspaceChoiceFields,
};

export const reloadPropsBody = z.object(dynamicPropsFields);

/** The Connect path form's `{project_id}`: a project (`proj_`) of a workspace of the caller. */
export const connectProjectParams = z.object({ project_id: idParam(ID_PREFIXES.project) });

export const configurePropBody = z.object({
  ...dynamicPropsFields,
  prop_name: z.string().min(1).max(256),
  page: z.number().int().min(0).max(1_000_000).optional(),
  prev_context: z.record(z.string(), z.unknown()).nullable().optional(),
  query: z.string().max(4096).optional(),
});

const observationSchema = z.object({
  k: z.string(),
  msg: z.string().optional(),
  err: z.object({ name: z.string(), message: z.string() }).optional(),
  ts: z.number(),
});

export const configurePropResponse = z.object({
  options: z.array(z.object({ label: z.string(), value: z.unknown() })).nullable(),
  stringOptions: z.array(z.string()).nullable(),
  context: z.record(z.string(), z.unknown()).nullable(),
  observations: z.array(observationSchema),
  errors: z.array(z.string()),
});

export const reloadPropsResponse = z.object({
  observations: z.array(observationSchema),
  errors: z.array(z.string()),
  dynamicProps: z.object({ id: z.string(), configurableProps: z.array(z.record(z.string(), z.unknown())) }).optional(),
});
