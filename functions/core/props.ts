/**
 * Props of a component: validation of `configured_props`, the `configurable_props` and
 * `configured_props` views, sealing of secret values, and the values a run receives. What each
 * prop type does is its entry in the table of `prop-types.ts`; this module walks a component's
 * props through it.
 *
 * Definitions are the `PropDescription[]` read from the code in the sandbox (static props, then
 * the ones `additionalProps` returned, see {@link mergeDynamicProps}). Pure: no I/O, except through
 * the `Secrets` port handed in.
 */
import type { Secrets } from "#core/ports/secrets";
import {
  findPropExpression,
  holdsPropExpression,
  type Json,
  type PropDescription,
  wholePropExpression,
} from "#runtime/protocol";
import { SEALED_SECRET, type StoredPropValue } from "./component-model.ts";
import { DomainError, type FieldIssue, isDomainError } from "./errors.ts";
import {
  type InterfaceContext,
  isObject,
  isSealed,
  isSecretProp,
  PropValueError,
  propTypeOf,
  unwrapLabel,
  type ValidatedProps,
} from "./prop-types.ts";

export {
  DB_SERVICE,
  HTTP_INTERFACE,
  type InterfaceContext,
  isSealed,
  TIMER_INTERFACE,
  type ValidatedProps,
} from "./prop-types.ts";

/** Largest JSON text of one configured prop value (component-model.md "Limits": 64KB). */
export const PROP_VALUE_MAX_BYTES = 64 * 1024;

/**
 * Validates the request's `configured_props` against the component's props and applies
 * defaults and static values.
 *
 * Every problem is collected; one `validation` DomainError names them all, each on
 * `configured_props.<name>`. Rules beyond the spec (docs/decisions.md): `null` counts as absent
 * except for `any` props; types the spec does not list (`$.airtable.baseId`, `sql`, ...) take any
 * JSON value; a `static` prop accepts only its static value; an http prop accepts any object and
 * ignores its content (so a read-back `{endpoint_url}` can be sent again).
 *
 * @param input the request's `configured_props`; `undefined` and `null` mean none.
 * @param fieldPrefix the field that holds `input` in the request, named in every issue: a
 *   workflow step's props are `steps[i].props` (docs/design/workflows.md 1.2).
 * @throws DomainError `validation`.
 */
export function validateConfiguredProps(
  defs: PropDescription[],
  input: unknown,
  fieldPrefix = "configured_props",
  options: { expressions?: boolean } = {},
): ValidatedProps {
  if (input !== undefined && input !== null && !isObject(input)) {
    throw new DomainError("validation", `${fieldPrefix}: must be an object keyed by prop name`, [
      { field: fieldPrefix, message: "must be an object keyed by prop name" },
    ]);
  }
  const given: Record<string, Json> = input ?? {};
  const issues: FieldIssue[] = [];
  const result: ValidatedProps = { values: {}, secretNames: [], dbPropNames: [] };
  const known = new Set(defs.map((def) => def.name));

  for (const def of defs) {
    const field = `${fieldPrefix}.${def.name}`;
    const type = propTypeOf(def.type);
    try {
      const raw = Object.hasOwn(given, def.name) ? unwrapLabel(given[def.name]) : undefined;
      // A default from the code may be an expression too (the registry's `{{steps.trigger...}}`).
      const expression = options.expressions ? expressionOf(def, raw) : undefined;
      const value = expression ?? type.validate(def, raw, field);
      if (value === undefined) continue;
      type.record?.(result, def, value);
      const bytes = jsonBytes(value);
      if (bytes > PROP_VALUE_MAX_BYTES) {
        throw new PropValueError(
          `is ${bytes} bytes as JSON; a prop value may be at most ${PROP_VALUE_MAX_BYTES} bytes`,
        );
      }
      result.values[def.name] = value;
      if (isSecretProp(def)) result.secretNames.push(def.name);
    } catch (error) {
      issues.push(...issuesOf(error, field));
    }
  }
  for (const name of Object.keys(given)) {
    if (!known.has(name)) issues.push({ field: `${fieldPrefix}.${name}`, message: "is not a prop of this component" });
  }

  if (issues.length > 0) {
    const summary = issues.map((issue) => `${issue.field}: ${issue.message}`).join("; ");
    throw new DomainError("validation", summary, issues);
  }
  return result;
}

/**
 * Prop types whose values are structures Sluice binds (an account, a store, a request, an
 * interface): a workflow step's `{{ ... }}` expressions are neither taken nor evaluated in them.
 */
const PROP_TYPES_WITHOUT_EXPRESSIONS: ReadonlySet<string> = new Set([
  "app",
  "data_store",
  "http_request",
  "alert",
  "$.interface.http",
  "$.interface.timer",
  "$.service.db",
]);

/** Whether a prop's value may hold expressions: a plain type, neither secret (its text is the secret) nor static. */
const takesExpressions = (def: PropDescription) =>
  def.static === undefined && !isSecretProp(def) && !PROP_TYPES_WITHOUT_EXPRESSIONS.has(def.type);

/**
 * A step's prop value that is a `{{ ... }}` expression, taken as it is (its value is known only
 * when the step runs: `runtime-layer/prop-expressions.ts`), or undefined: only a string holding
 * one, given or else the code's `default`, for a prop that takes expressions.
 */
function expressionOf(def: PropDescription, raw: Json | undefined): string | undefined {
  const candidate = raw === undefined ? def.default : raw;
  if (typeof raw === "string" && isSecretProp(def) && wholePropExpression(raw) !== undefined) {
    // The registry's secret props say to enter `{{process.env.NAME}}`: taken as written it would be
    // the secret itself, silently. A secret that is one expression and nothing else is refused.
    throw new PropValueError(
      "is a secret prop, whose value is taken as written: expressions are not evaluated in secret props; give the secret itself",
    );
  }
  if (typeof candidate !== "string" || !takesExpressions(def)) return undefined;
  return findPropExpression(candidate) === undefined ? undefined : candidate;
}

/**
 * The props of a step whose stored values hold expressions for the runtime to evaluate
 * (`WorkflowStepInvocation.expressions`); undefined when none do.
 */
export function expressionProps(defs: PropDescription[], values: Record<string, Json>): string[] | undefined {
  const names = defs
    .filter((def) => Object.hasOwn(values, def.name) && takesExpressions(def) && holdsPropExpression(values[def.name]))
    .map((def) => def.name);
  return names.length > 0 ? names : undefined;
}

function issuesOf(error: unknown, field: string): FieldIssue[] {
  if (error instanceof PropValueError) return [{ field, message: error.message }];
  if (isDomainError(error) && error.code === "validation") {
    return error.issues && error.issues.length > 0 ? error.issues : [{ field, message: error.message }];
  }
  throw error;
}

const encoder = new TextEncoder();
const jsonBytes = (value: Json) => encoder.encode(JSON.stringify(value)).length;

/**
 * The final prop set: static props, then the props `additionalProps` returned. A dynamic prop
 * named like a static one may only change its `disabled` and `hidden` (component-model.md); any
 * other dynamic prop is added after the static ones. When `additionalProps` returns a name twice
 * the last one wins.
 */
export function mergeDynamicProps(staticDefs: PropDescription[], dynamicDefs: PropDescription[]): PropDescription[] {
  const dynamic = new Map(dynamicDefs.map((def) => [def.name, def]));
  const merged = staticDefs.map((def) => {
    const override = dynamic.get(def.name);
    if (!override) return def;
    const out = { ...def };
    if (override.disabled !== undefined) out.disabled = override.disabled;
    if (override.hidden !== undefined) out.hidden = override.hidden;
    return out;
  });
  const staticNames = new Set(staticDefs.map((def) => def.name));
  // `__proto__` cannot be a prop: stored values and `this` would take it for their prototype.
  for (const def of dynamic.values()) if (!staticNames.has(def.name) && def.name !== "__proto__") merged.push(def);
  return merged;
}

/** Attributes echoed in `configurable_props`, in this order, when the code set them. */
const ECHOED = [
  "label",
  "description",
  "optional",
  "default",
  "secret",
  "min",
  "max",
  "options",
  "remoteOptions",
  "app",
  "customResponse",
  "useQuery",
  "reloadProps",
  "alertType",
  "content",
  "disabled",
  "hidden",
  "static",
] as const;

export type ConfigurablePropView = { name: string; type: string } & Partial<
  Pick<PropDescription, (typeof ECHOED)[number]>
>;

/**
 * The `configurable_props` of a Component resource. A secret prop echoes neither its `default`
 * nor a `static` value: both would be the secret.
 */
export function configurablePropsView(defs: PropDescription[]): ConfigurablePropView[] {
  return defs.map((def) => {
    const view: Record<string, unknown> = { name: def.name, type: def.type };
    for (const attribute of ECHOED) {
      if (def[attribute] === undefined) continue;
      if (def.secret === true && (attribute === "default" || attribute === "static")) continue;
      view[attribute] = def[attribute];
    }
    return view as ConfigurablePropView;
  });
}

/**
 * The `configured_props` of a Source resource: each prop as its type's view gives it (timer as
 * `{cron, interval_seconds}` plus `timezone` when set, http as `{endpoint_url}`, db as
 * `{type: "$.service.db"}`, others as stored). Secret values are never returned, not even sealed;
 * alerts have none. Stored values of props no longer defined are kept, except sealed ones.
 */
export function configuredPropsView(
  defs: PropDescription[],
  stored: Record<string, StoredPropValue>,
  ctx: InterfaceContext,
): Record<string, Json> {
  const out: Record<string, Json> = {};
  const defined = new Set<string>();
  for (const def of defs) {
    defined.add(def.name);
    const view = propTypeOf(def.type).view(def, stored[def.name], ctx);
    if (view !== undefined) out[def.name] = view;
  }
  for (const [name, value] of Object.entries(stored)) {
    if (!defined.has(name) && !isSealed(value)) out[name] = value;
  }
  return out;
}

/** Replaces each secret value with `{ [SEALED_SECRET]: ciphertext }`, ready to store. */
export async function sealSecretValues(
  secrets: Secrets,
  values: Record<string, Json>,
  secretNames: string[],
): Promise<Record<string, StoredPropValue>> {
  const out: Record<string, StoredPropValue> = { ...values };
  for (const name of secretNames) {
    const value = values[name];
    if (typeof value !== "string") continue;
    out[name] = { [SEALED_SECRET]: await secrets.seal(value) };
  }
  return out;
}

/**
 * Opens every sealed value of `stored`, to build an invocation. The values are opened at once: on
 * a cold AWS container each one waits for KMS to decrypt its own data key.
 */
export async function openSecretValues(
  secrets: Secrets,
  stored: Record<string, StoredPropValue>,
): Promise<Record<string, Json>> {
  const entries = await Promise.all(
    Object.entries(stored).map(
      async ([name, value]): Promise<[string, Json]> => [
        name,
        isSealed(value) ? await secrets.open(value[SEALED_SECRET]) : value,
      ],
    ),
  );
  return Object.fromEntries(entries);
}

/**
 * What `Invocation.props` and `propTypes` carry (runtime-layer/protocol.ts), as each prop's type
 * gives it: http as `{endpoint, customResponse}`, timer as `{type: "$.interface.timer", ...config}`,
 * db as `{type: "$.service.db"}`, every other prop its (opened) value. `propTypes` names every prop
 * but display-only ones (alerts), also those without a value (an app prop without an account
 * still has methods).
 */
export function runtimeProps(
  defs: PropDescription[],
  openedValues: Record<string, Json>,
  ctx: InterfaceContext,
): { props: Record<string, Json>; propTypes: Record<string, string> } {
  const props: Record<string, Json> = {};
  const propTypes: Record<string, string> = {};
  for (const def of defs) {
    const type = propTypeOf(def.type);
    if (type.displayOnly) continue;
    propTypes[def.name] = def.type;
    const value = type.runValue(def, openedValues[def.name], ctx);
    if (value !== undefined) props[def.name] = value;
  }
  return { props, propTypes };
}

const SLUG_MAX = 64;

/**
 * The `name_slug` of a name: lower case, runs of `[a-z0-9]` joined by `-`, accents dropped
 * (`Café` → `cafe`), at most 64 characters, never empty (`source`).
 */
export function slugify(name: string): string {
  const words = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .match(/[a-z0-9]+/g);
  const slug = (words ?? []).join("-").slice(0, SLUG_MAX).replace(/-+$/, "");
  return slug === "" ? "source" : slug;
}
