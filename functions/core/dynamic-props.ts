/**
 * Dynamic props (docs/components.md "Dynamic props"): the configure and props endpoints in the
 * shape of the original's Connect API (real-behaviour.md §1.10). Both ask a component's code a
 * question on the caller's configured props and apply nothing: a prop's async `options` for one
 * page, or `additionalProps` for the prop set it makes. The code runs in the sandbox as a probe
 * of a source (`probeSource`, as `additionalProps` at deploy), with the same isolation and time
 * limit, under a probe id of its own per workspace and component; what it answers is validated
 * here as hostile input (`prop-options.ts`). What the code threw, a time-out or a malformed
 * answer comes back in `errors` of a 200, as the original answers.
 */
import type { Deps } from "#core/ports/deps";
import type { InvocationResult } from "#runtime/protocol";
import { requireProject } from "./access.ts";
import { chosenWorkspace, type WorkspaceChoice, workspaceOrDefault } from "./accounts.ts";
import { requireAccounts } from "./app-accounts.ts";
import type { ComponentRecord, Json, PropDescription, SourceRecord } from "./component-model.ts";
import { findComponent } from "./components.ts";
import { invalid } from "./errors.ts";
import type { Caller } from "./identity.ts";
import { probeIdOf } from "./ids.ts";
import {
  errorEntry,
  MAX_DYNAMIC_PROPS,
  type Observation,
  type OptionsPage,
  OptionsResultError,
  observationsOf,
  optionsPage,
} from "./prop-options.ts";
import {
  type ConfigurablePropView,
  configurablePropsView,
  mergeDynamicProps,
  validateConfiguredProps,
} from "./props.ts";
import { redactPaths } from "./redact-paths.ts";
import { sha256Hex } from "./sha256.ts";
import { probeSource, sourceCode } from "./source-runs.ts";

/** The body both endpoints share (the original's `ReloadPropsOpts`). */
export interface DynamicPropsInput extends WorkspaceChoice {
  /** A saved component (`sc_`), the caller's component key, or a registry key. */
  id: string;
  configured_props?: Record<string, unknown> | undefined;
  /** Accepted for the original's clients; Sluice recomputes the prop set from `configured_props`. */
  dynamic_props_id?: string | undefined;
}

/** The configure body (the original's `ConfigurePropOpts`). */
export interface ConfigurePropInput extends DynamicPropsInput {
  prop_name: string;
  page?: number | undefined;
  prev_context?: Record<string, unknown> | null | undefined;
  query?: string | undefined;
}

/** `POST /components/configure`'s answer (the original's `ConfigurePropResponse`). */
export interface ConfigurePropAnswer extends OptionsPage {
  observations: Observation[];
  errors: string[];
}

/** `POST /components/props`'s answer (the original's `ReloadPropsResponse`). */
export interface ReloadPropsAnswer {
  observations: Observation[];
  errors: string[];
  /** Absent when `additionalProps` failed. */
  dynamicProps?: { id: string; configurableProps: ConfigurablePropView[] };
}

/** `POST /components/configure`: one page of a prop's options, on the caller's configured props. */
export async function configureComponentProp(
  deps: Deps,
  caller: Caller,
  input: ConfigurePropInput,
): Promise<ConfigurePropAnswer> {
  const { component, probe } = await probeFor(deps, caller, input);
  const request: Record<string, Json> = {
    prop: input.prop_name,
    page: input.page ?? 0,
    prevContext: (input.prev_context ?? {}) as Json,
    previousPropDefs: component.metadata.props as unknown as Json,
  };
  if (input.query !== undefined) request.query = input.query;
  const result = await ask(deps, probe, component, "propOptions", request);
  const empty: OptionsPage = { options: null, stringOptions: null, context: null };
  if (result.error)
    return { ...empty, observations: observationsOf(result.logs, result.error), errors: errorsOf(result) };
  try {
    return { ...optionsPage(result.propOptions), observations: observationsOf(result.logs), errors: [] };
  } catch (error) {
    if (!(error instanceof OptionsResultError)) throw error;
    return { ...empty, observations: observationsOf(result.logs), errors: [errorEntry(error)] };
  }
}

/**
 * `POST /components/props`: the prop set `additionalProps` makes on the caller's configured props
 * (run again after a prop with `reloadProps: true` changes), merged with the static props as at
 * deploy. A component without `additionalProps` answers its static props without running code.
 */
export async function reloadComponentProps(
  deps: Deps,
  caller: Caller,
  input: DynamicPropsInput,
): Promise<ReloadPropsAnswer> {
  const { component, probe } = await probeFor(deps, caller, input);
  const staticDefs = component.metadata.props;
  if (!component.metadata.hasAdditionalProps) {
    return { observations: [], errors: [], dynamicProps: dynamicPropsOf(component, staticDefs) };
  }
  // As at deploy: additionalProps(previousPropDefs) receives the static definitions.
  const result = await ask(deps, probe, component, "additionalProps", staticDefs as unknown as Json);
  if (result.error) return { observations: observationsOf(result.logs, result.error), errors: errorsOf(result) };
  const returned = result.additionalProps ?? [];
  if (returned.length > MAX_DYNAMIC_PROPS) {
    const message = `additionalProps() returned ${returned.length} props; at most ${MAX_DYNAMIC_PROPS} are accepted`;
    return { observations: observationsOf(result.logs), errors: [errorEntry({ name: "OptionsResultError", message })] };
  }
  const merged = mergeDynamicProps(staticDefs, returned);
  return { observations: observationsOf(result.logs), errors: [], dynamicProps: dynamicPropsOf(component, merged) };
}

/** Prop types only a source may have (other `$.` types, such as `$.airtable.baseId`, are values). */
const SOURCE_ONLY_TYPES: ReadonlySet<string> = new Set(["$.interface.http", "$.interface.timer", "$.service.db"]);

/**
 * The final prop set of a workflow step whose component has `additionalProps`, at create and PUT
 * (as a source's at deploy): the code's `additionalProps` runs on the step's static props, already
 * validated (`staticValues`, in clear: never stored from here), in the probe sandbox the dynamic
 * props endpoints use (its data stores unbound, as at a source's deploy), and what it returns is
 * merged with the static props. Its failure, or a
 * set that adds what only a source may have (an interface or service prop), is a 400 on the step.
 */
export async function stepPropDefinitions(
  deps: Deps,
  caller: Caller,
  workspaceId: string,
  component: ComponentRecord,
  staticValues: Record<string, Json>,
  /** The request field of the props, named by a refusal (`steps[0].props`, `configured_props`). */
  propsField: string,
): Promise<PropDescription[]> {
  const staticDefs = component.metadata.props;
  const probe = probeRecord(deps, caller, workspaceId, component, staticValues, staticDefs);
  // additionalProps(previousPropDefs) receives the static definitions, and data stores stay
  // unbound, as at a source's deploy (a create makes no store by asking).
  await deps.host.prepare(sourceCode(probe, component));
  const result = await probeSource(deps, probe, component, "additionalProps", staticDefs as unknown as Json);
  if (result.error) throw invalid(propsField, `additionalProps failed: ${redactPaths(result.error.message)}`);
  const returned = result.additionalProps ?? [];
  if (returned.length > MAX_DYNAMIC_PROPS) {
    throw invalid(
      propsField,
      `additionalProps() returned ${returned.length} props; at most ${MAX_DYNAMIC_PROPS} are accepted`,
    );
  }
  const sourceOnly = returned.find((def) => SOURCE_ONLY_TYPES.has(def.type));
  if (sourceOnly) {
    throw invalid(
      propsField,
      `additionalProps() returned the ${sourceOnly.type} prop ${sourceOnly.name}; a step cannot have it`,
    );
  }
  return mergeDynamicProps(staticDefs, returned);
}

/**
 * The Connect path form (`/v1/connect/{project_id}/{components,actions,triggers}/...`): the project must be of a
 * workspace the caller belongs to (else 404, as a missing one), and the call runs in that
 * workspace. A body that names another workspace (`org_id`, `workspace_id`) is a 400.
 */
export async function inConnectProject<T extends WorkspaceChoice>(
  deps: Pick<Deps, "identity">,
  caller: Caller,
  projectId: string,
  input: T,
): Promise<T> {
  const { workspace } = await requireProject(deps, caller, projectId);
  const chosen = chosenWorkspace(input);
  if (chosen && chosen.id !== workspace.id) throw invalid(chosen.field, "names another workspace than the project's");
  return { ...input, org_id: undefined, workspace_id: workspace.id };
}

function errorsOf(result: InvocationResult): string[] {
  return result.error ? [errorEntry(result.error)] : [];
}

/**
 * The prop set with its id: `dyp_` and a digest of the component and the set, so the same set
 * has the same id. Nothing is stored under it (docs/decisions.md).
 */
function dynamicPropsOf(component: ComponentRecord, defs: PropDescription[]) {
  const configurableProps = configurablePropsView(defs);
  const digest = sha256Hex(`${component.id}\n${JSON.stringify(configurableProps)}`);
  return { id: `dyp_${digest.slice(0, 20)}`, configurableProps };
}

/**
 * The component the caller may use (their own `sc_`, key, or a registry key; another user's is
 * 404) and the probe to ask it on: a source record that is never stored, with the configured
 * props checked leniently. Every prop counts as optional (the caller is still configuring), a
 * name the static props do not declare is taken as an `any` prop (it may be a dynamic one), and
 * a value of a declared prop must still be of its type (400 naming it), an app prop's account one of
 * the workspace's for its app.
 */
async function probeFor(
  deps: Deps,
  caller: Caller,
  input: DynamicPropsInput,
): Promise<{ component: ComponentRecord; probe: SourceRecord }> {
  const component = await findComponent(deps, caller, input.id);
  const workspace = await workspaceOrDefault(deps, caller, input);
  const given = input.configured_props ?? {};
  const declared = new Set(component.metadata.props.map((def) => def.name));
  const defs: PropDescription[] = [
    ...component.metadata.props.map((def) => ({ ...def, optional: true })),
    ...Object.keys(given)
      // `__proto__` stays out: validation then refuses it as no prop, as at deploy.
      .filter((name) => !declared.has(name) && name !== "__proto__")
      .map((name): PropDescription => ({ name, type: "any", optional: true })),
  ];
  const validated = validateConfiguredProps(defs, given);
  // A named account must be the workspace's, as at deploy, before the code sees its credentials.
  await requireAccounts(deps, workspace.id, defs, validated.values, "configured_props", true);
  const probe = probeRecord(deps, caller, workspace.id, component, validated.values, defs);
  if (validated.timer) probe.timer = validated.timer;
  return { component, probe };
}

/**
 * The source record a probe runs as: never stored, so never sealed (secrets stay in clear for
 * the one question asked), under the probe id of its workspace and component.
 */
function probeRecord(
  deps: Pick<Deps, "clock">,
  caller: Caller,
  workspaceId: string,
  component: ComponentRecord,
  configuredProps: Record<string, Json>,
  propDefinitions: PropDescription[],
): SourceRecord {
  const now = deps.clock.nowMs();
  return {
    id: probeId(workspaceId, component.id),
    userId: caller.userId,
    workspaceId,
    componentId: component.id,
    name: "configure",
    nameSlug: "configure",
    configuredProps,
    propDefinitions,
    active: true,
    createdAt: now,
    updatedAt: now,
  };
}

/** Runs `kind` on the probe, its bundle (on AWS, its function) made first when it is not there yet. */
async function ask(
  deps: Deps,
  probe: SourceRecord,
  component: ComponentRecord,
  kind: "propOptions" | "additionalProps",
  event: Json,
): Promise<InvocationResult> {
  await deps.host.prepare(sourceCode(probe, component));
  // A prop's options often read its data store (the registry's `key` options list the store's keys).
  return probeSource(deps, probe, component, kind, event, "configured");
}

/**
 * The id the probes of one component in one workspace run under: a source id of time 0 (no real
 * source has it) derived from both, so successive pages reuse a warm sandbox child while two
 * workspaces never share one.
 */
function probeId(workspaceId: string, componentId: string): string {
  return probeIdOf("source", "configure", workspaceId, componentId);
}
