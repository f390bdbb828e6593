import * as z from "zod";
import { requireProject } from "#core/access";
import { DomainError } from "#core/errors";
import type { Caller } from "#core/identity";
import { ID_PREFIXES } from "#core/ids";
import type { Deps } from "#core/ports/deps";
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

/** The Connect API serves configure and props under these three (real-behaviour.md §1.10), alike. */
export const CONNECT_COMPONENT_KINDS = ["components", "actions", "triggers"] as const;

/** `/v1/connect/{project_id}/{component_kind}/...`: a kind outside the three is a route that does not exist. */
export const connectComponentParams = connectProjectParams.extend({
  component_kind: z
    .string()
    .max(32)
    .meta({ description: "components, actions or triggers (they answer alike); any other word is a 404" }),
});

/**
 * The guard of the Connect path form `<method> /v1/connect/{project_id}/{component_kind}/<last>`
 * (`last` a word, or what names the component): a kind outside the three answers as a route that
 * does not exist, a project not the caller's as a missing one, before the body is read.
 */
export const connectComponentGuard =
  <P extends z.infer<typeof connectComponentParams>>(method: "GET" | "POST", last: (params: P) => string) =>
  async (deps: Deps, { caller, params }: { caller: Caller; params: P }) => {
    if (!(CONNECT_COMPONENT_KINDS as readonly string[]).includes(params.component_kind)) {
      throw new DomainError(
        "not_found",
        `no route for ${method} /v1/connect/${params.project_id}/${params.component_kind}/${last(params)}`,
      );
    }
    await requireProject(deps, caller, params.project_id);
  };

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

/** The run action's body (the original's `RunActionOpts`). */
export const runActionBody = z.object({
  id: dynamicPropsFields.id,
  configured_props: dynamicPropsFields.configured_props,
  dynamic_props_id: dynamicPropsFields.dynamic_props_id,
  external_user_id: dynamicPropsFields.external_user_id,
  version: z
    .string()
    .max(64)
    .nullable()
    .optional()
    .meta({ description: "The action's version; when given, it must be the one Sluice has under id" }),
  stash_id: z
    .union([z.string().max(128), z.boolean()])
    .nullable()
    .optional()
    .meta({ description: "Accepted only absent, null, empty or false: Sluice keeps no File Stash" }),
  org_id: workspaceChoiceFields.org_id.meta({
    description: "Must be the project's workspace when given (400 otherwise): the project fixes the workspace",
  }),
  workspace_id: workspaceChoiceFields.workspace_id.meta({ description: "The same as org_id" }),
});

export const runActionResponse = z.object({
  exports: z.record(z.string(), z.unknown()),
  os: z.array(observationSchema),
  ret: z.unknown().optional(),
  error: z.object({ name: z.string(), message: z.string() }).optional(),
});
