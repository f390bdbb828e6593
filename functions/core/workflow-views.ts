/**
 * The Workflow resource (docs/design/workflows.md 1.3, W4): one view serves create, GET, PUT and
 * the lists. It is the spec's create shape, which holds every field of its details shape, so a
 * client of either works. Times are epoch seconds, as in the Source view; secret props are never
 * in it, not even sealed.
 */

import type { Deps } from "#core/ports/deps";
import { accountIdOf } from "./app-accounts.ts";
import { entryCode, storedComponentFiles } from "./component-files.ts";
import type { ComponentRecord, SourceRecord } from "./component-model.ts";
import { REGISTRY_OWNER } from "./components.ts";
import { configurablePropsView, configuredPropsView } from "./props.ts";
import { sourceView } from "./sources.ts";
import { epochSeconds } from "./time.ts";
import { DEFAULT_TIMER_TIMEZONE } from "./timer-schedule.ts";
import { type StepRecord, stepPropSet, type TriggerRecord, type WorkflowRecord } from "./workflow-model.ts";

/** What a view needs besides the record: the components of its steps and the sources of its triggers, by id. */
export interface WorkflowViewParts {
  components: ReadonlyMap<string, ComponentRecord>;
  sources: ReadonlyMap<string, SourceRecord>;
}

/** The endpoint of an HTTP trigger: `<publicUrl>/http/<key>`, as a source's. */
export function workflowEndpointUrl(deps: Pick<Deps, "runtime">, key: string): string {
  return `${deps.runtime.publicUrl}/http/${key}`;
}

function stepView(step: StepRecord, component: ComponentRecord | undefined) {
  const code = step.origin === "code" && component ? entryCode(component.code) : null;
  const files = component && storedComponentFiles(component.code);
  // Steps take no interface props (validation refuses them), so the view needs no endpoint or timer.
  const defs = component ? stepPropSet(step, component) : [];
  const configured = configuredPropsView(defs, step.configuredProps, {});
  // The spec's account fields: each app prop's `apn_` id, by prop name.
  const authProvisionIdMap: Record<string, string> = {};
  for (const def of defs) {
    const id = def.type === "app" ? accountIdOf(step.configuredProps[def.name]) : undefined;
    if (id !== undefined) authProvisionIdMap[def.name] = id;
  }
  return {
    id: step.id,
    type: step.origin === "code" ? "CodeCell" : "ActionCell",
    namespace: step.namespace,
    disabled: step.disabled,
    lang: "nodejs",
    code_raw: code,
    codeRaw: code,
    codeConfigJson: null,
    text_raw: null,
    appConnections: [],
    flat_params_visibility_json: null,
    params_json: "{}",
    component: true,
    savedComponent: component
      ? {
          id: component.id,
          code: entryCode(component.code),
          codeHash: component.codeHash,
          // The step's own set: its additionalProps' props too, which it takes.
          configurableProps: configurablePropsView(defs),
          key: component.key ?? null,
          description: component.metadata.description ?? null,
          entryPath: files ? files.entry : null,
          version: component.version,
          apps: [],
        }
      : null,
    component_key: component?.key ?? null,
    component_owner_id: component === undefined || component.ownerId === REGISTRY_OWNER ? null : component.ownerId,
    configured_props_json: JSON.stringify(configured),
    authProvisionIdMap,
    authProvisionIds: [...new Set(Object.values(authProvisionIdMap))],
  };
}

function triggerView(deps: Pick<Deps, "runtime">, trigger: TriggerRecord, parts: WorkflowViewParts) {
  switch (trigger.type) {
    case "http":
      return {
        id: trigger.id,
        key: trigger.key,
        endpoint_url: workflowEndpointUrl(deps, trigger.key),
        custom_response: trigger.customResponse,
        created_at: epochSeconds(trigger.createdAt),
        updated_at: epochSeconds(trigger.updatedAt),
      };
    case "timer":
      return {
        id: trigger.id,
        interval_seconds: trigger.spec.intervalSeconds ?? 0,
        cron: trigger.spec.cron ?? null,
        // The spec's `timezone` is a string: the zone the cron reads, UTC when none was given.
        timezone: trigger.spec.timezone ?? DEFAULT_TIMER_TIMEZONE,
        schedule_changed_at: epochSeconds(trigger.scheduleChangedAt),
        created_at: epochSeconds(trigger.createdAt),
        updated_at: epochSeconds(trigger.updatedAt),
      };
    case "source": {
      const source = parts.sources.get(trigger.sourceId);
      // A source deleted meanwhile is left out (W5): its subscription went with it.
      if (!source) return undefined;
      // A source the workflow deployed shows it as `owner_id` (its record's `workflowId`).
      return sourceView(deps, source, parts.components.get(source.componentId));
    }
  }
}

/** The Workflow resource of a record. */
export function workflowView(deps: Pick<Deps, "runtime">, workflow: WorkflowRecord, parts: WorkflowViewParts) {
  return {
    id: workflow.id,
    name: workflow.name,
    active: workflow.active,
    org_id: workflow.workspaceId,
    project_id: workflow.projectId,
    external_id: workflow.externalId ?? null,
    deployment_id: workflow.deploymentId,
    created_at: epochSeconds(workflow.createdAt),
    updated_at: epochSeconds(workflow.updatedAt),
    steps: workflow.steps.map((step) => stepView(step, parts.components.get(step.componentId))),
    triggers: workflow.triggers.flatMap((trigger) => {
      const view = triggerView(deps, trigger, parts);
      return view === undefined ? [] : [view];
    }),
  };
}

export type WorkflowView = ReturnType<typeof workflowView>;
