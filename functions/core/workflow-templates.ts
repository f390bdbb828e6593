/**
 * Workflow templates (`tch_`, docs/design/workflows.md 1.5): a stored definition shaped like a
 * create body, shipped under `registry/templates/` and read through the `ComponentRegistry`.
 * `POST /workflows` with `template_id` starts from it: a body field that is present replaces the
 * template's (`steps`, `triggers`), and `settings` are merged key by key.
 */

import * as z from "zod";
import type { Deps } from "#core/ports/deps";
import { invalid } from "./errors.ts";

const item = z.record(z.string(), z.unknown());

/** A template file: `{id, name, description, steps, triggers, settings}`. */
export const workflowTemplateSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  steps: z.array(item),
  triggers: z.array(item),
  settings: z.object({ name: z.string().optional(), auto_deploy: z.boolean().optional() }),
});

export type WorkflowTemplate = z.infer<typeof workflowTemplateSchema>;

/** The template `id`; an unknown one is a 400 naming `template_id`. */
export async function readWorkflowTemplate(deps: Pick<Deps, "registry">, id: string): Promise<WorkflowTemplate> {
  const text = await deps.registry.readTemplate(id);
  if (text === undefined) throw invalid("template_id", "no workflow template has this id");
  // The files are Sluice's own (test/unit/registry.test.ts reads each): a bad one is a bug, a 500.
  const template = workflowTemplateSchema.parse(JSON.parse(text));
  if (template.id !== id) throw new Error(`the template file of ${id} names itself ${template.id}`);
  return template;
}

/** The parts of a create body a template gives. */
interface TemplatedFields<Step, Trigger> {
  template_id?: string | undefined;
  settings?: { name?: string | undefined; auto_deploy?: boolean | undefined } | undefined;
  steps?: Step[] | undefined;
  triggers?: Trigger[] | undefined;
}

/**
 * `input` started from its template, if it names one: its `steps` and `triggers` when present,
 * else the template's, and the template's settings (its name by default) under the input's.
 */
export async function withTemplate<Step, Trigger, T extends TemplatedFields<Step, Trigger>>(
  deps: Pick<Deps, "registry">,
  input: T,
): Promise<T> {
  if (input.template_id === undefined) return input;
  const template = await readWorkflowTemplate(deps, input.template_id);
  return {
    ...input,
    // Shaped like a create body's items; the create checks them as it checks the client's.
    steps: input.steps ?? (template.steps as Step[]),
    triggers: input.triggers ?? (template.triggers as Trigger[]),
    settings: { name: template.name, ...template.settings, ...definedMembers(input.settings ?? {}) },
  };
}

/** The members of `object` that are not `undefined`, so that an absent setting keeps the template's. */
function definedMembers<O extends object>(object: O): Partial<O> {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined)) as Partial<O>;
}
