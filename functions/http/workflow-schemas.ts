import * as z from "zod";
import { ID_PREFIXES } from "#core/ids";
import {
  componentChoiceFields,
  componentFilesFields,
  idParam,
  sourceNameField,
  sourceSchema,
  workspaceChoiceFields,
} from "./schemas.ts";

/**
 * Schemas of the workflow routes (docs/design/workflows.md 1.1-1.3). The bodies type each field
 * for the OpenAPI document; the rules of design 1.2 (counts, namespaces, one of three code
 * choices, props) are core's, which names the field by its path (`steps[2].props.url`).
 */

export const workflowIdParams = z.object({ workflow_id: idParam(ID_PREFIXES.workflow) });

export const stepInputSchema = z
  .object({
    namespace: z
      .string()
      .max(64)
      .optional()
      .meta({ description: "Required; ^[A-Za-z_][A-Za-z0-9_]{0,63}$, not trigger" }),
    component_code: z.string().optional(),
    ...componentFilesFields,
    component_id: z.string().max(128).optional(),
    key: z.string().max(128).optional().meta({ description: "A registry component's key" }),
    props: z.record(z.string(), z.unknown()).optional(),
    disabled: z.boolean().optional(),
  })
  .meta({ description: "A step: exactly one of component_code, component_files, component_id and key" });

/**
 * A trigger's props. Those of a "source" trigger that deploys its own source are typed as
 * `POST /v1/sources` types them, so that a bad one is a 400 naming `triggers[i].props.<field>`;
 * which props each type takes is core's check.
 */
const triggerPropsSchema = z.looseObject({
  custom_response: z.boolean().optional().meta({ description: '"http": answer with $.respond (default false)' }),
  intervalSeconds: z.unknown().optional().meta({ description: '"timer": seconds between runs (or cron)' }),
  cron: z.unknown().optional().meta({ description: '"timer": a cron expression (or intervalSeconds)' }),
  timezone: z.unknown().optional().meta({ description: '"timer": the cron\'s IANA time zone (default UTC)' }),
  source_id: z.string().max(128).optional().meta({ description: '"source": an existing source of yours (dc_)' }),
  ...componentChoiceFields,
  name: sourceNameField,
  configured_props: z.record(z.string(), z.unknown()).optional(),
});

export const triggerInputSchema = z
  .object({
    id: z.string().max(128).optional().meta({ description: "On PUT: the trigger this item keeps (hi_ or ti_)" }),
    type: z.string().max(32),
    props: triggerPropsSchema.optional(),
  })
  .meta({
    description:
      'A trigger: "http" {custom_response}, "timer" {intervalSeconds | cron, timezone}, or "source" with either source_id or a source to deploy (component_code, component_files, component_id, component_url or key, with name and configured_props, as POST /v1/sources)',
  });

const externalIdField = z.string().max(1000).optional().meta({
  description:
    "Your name for the workflow (1 to 200 printable characters), unique in its workspace: the same request sent again with it changes nothing",
});

const settingsFields = {
  name: z
    .string()
    .max(1000)
    .optional()
    .meta({ description: 'The workflow\'s name (1 to 200 characters); default "Untitled workflow"' }),
};

export const createWorkflowBody = z.object({
  ...workspaceChoiceFields,
  project_id: z.string().max(128).optional(),
  template_id: z.string().max(128).optional().meta({
    description: "Start from this template (tch_…): fields given replace its steps and triggers; settings merge",
  }),
  external_id: externalIdField,
  settings: z
    .object({
      ...settingsFields,
      auto_deploy: z.boolean().optional().meta({ description: "true: created active (default false)" }),
    })
    .optional(),
  steps: z.array(stepInputSchema).max(1000).optional(),
  triggers: z.array(triggerInputSchema).max(1000).optional(),
});

/** A field only POST takes: the schema lets it through so that the core refuses it by name (400). */
const createOnly = (what: string) =>
  z
    .unknown()
    .optional()
    .meta({ description: `Not taken here (400): ${what} only when the workflow is created` });

export const updateWorkflowBody = z.object({
  active: z.boolean().optional(),
  external_id: externalIdField,
  template_id: createOnly("a template is used"),
  settings: z.object({ ...settingsFields, auto_deploy: createOnly("auto_deploy is read") }).optional(),
  steps: z.array(stepInputSchema).max(1000).optional(),
  triggers: z.array(triggerInputSchema).max(1000).optional(),
});

const stepSchema = z
  .object({
    id: z.string(),
    type: z.enum(["CodeCell", "ActionCell"]),
    namespace: z.string(),
    disabled: z.boolean(),
    lang: z.string(),
    code_raw: z.string().nullable(),
    codeRaw: z.string().nullable(),
    component: z.boolean(),
    savedComponent: z.record(z.string(), z.unknown()).nullable(),
    component_key: z.string().nullable(),
    component_owner_id: z.string().nullable(),
    configured_props_json: z.string(),
  })
  .catchall(z.unknown());

const httpTriggerSchema = z.object({
  id: z.string(),
  key: z.string(),
  endpoint_url: z.string(),
  custom_response: z.boolean(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});

const timerTriggerSchema = z.object({
  id: z.string(),
  interval_seconds: z.number().int(),
  cron: z.string().nullable(),
  timezone: z.string().meta({ description: "The zone the cron is read in; UTC when none was given" }),
  schedule_changed_at: z.number().int(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});

export const workflowSchema = z.object({
  id: z.string(),
  name: z.string(),
  active: z.boolean(),
  org_id: z.string(),
  project_id: z.string(),
  external_id: z.string().nullable(),
  deployment_id: z.string(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
  steps: z.array(stepSchema),
  triggers: z.array(z.union([httpTriggerSchema, timerTriggerSchema, sourceSchema])),
});
