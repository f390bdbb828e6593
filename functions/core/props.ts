/**
 * Props of a component: validation of `configured_props`, the `configurable_props` and
 * `configured_props` views, sealing of secret values, and the values a run receives.
 *
 * Definitions are the `PropDescription[]` read from the code in the sandbox (static props, then
 * the ones `additionalProps` returned, see {@link mergeDynamicProps}). Pure: no I/O, except through
 * the `Secrets` port handed in.
 */
import type { Secrets } from "#core/ports/secrets";
import type { Json, PropDescription } from "#runtime/protocol";
import { SEALED_SECRET, type StoredPropValue, type TimerSpec } from "./component-model.ts";
import { DomainError, type FieldIssue, isDomainError } from "./errors.ts";
import { validateTimerSpec } from "./timer-schedule.ts";

/** Largest JSON text of one configured prop value (component-model.md "Limits": 64KB). */
export const PROP_VALUE_MAX_BYTES = 64 * 1024;

export const HTTP_INTERFACE = "$.interface.http";
export const TIMER_INTERFACE = "$.interface.timer";
export const DB_SERVICE = "$.service.db";

/** The type `describeComponent` reports for a prop whose code gives none. */
const UNKNOWN_TYPE = "unknown";

/** What `validateConfiguredProps` accepted: the values to store (secrets still in clear). */
export interface ValidatedProps {
  /**
   * One entry per prop that has a value, in declaration order. Interface and service props keep
   * their configuration: the timer its `TimerSpec`, http and db `{}`.
   */
  values: Record<string, Json>;
  /** Props of `values` that are secret strings, to seal before storing. */
  secretNames: string[];
  timer?: TimerSpec;
  http?: { propName: string; customResponse: boolean };
  dbPropNames: string[];
}

type JsonObject = { [key: string]: Json };

const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const has = (value: object, key: string) => Object.hasOwn(value, key);

/** A problem with one prop, before it is given its field name. */
class PropValueError extends Error {}

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
 * @throws DomainError `validation`.
 */
export function validateConfiguredProps(defs: PropDescription[], input: unknown): ValidatedProps {
  if (input !== undefined && input !== null && !isObject(input)) {
    throw new DomainError("validation", "configured_props: must be an object keyed by prop name", [
      { field: "configured_props", message: "must be an object keyed by prop name" },
    ]);
  }
  const given: JsonObject = input ?? {};
  const issues: FieldIssue[] = [];
  const result: ValidatedProps = { values: {}, secretNames: [], dbPropNames: [] };
  const known = new Set(defs.map((def) => def.name));

  for (const def of defs) {
    const field = `configured_props.${def.name}`;
    try {
      const value = validateProp(def, has(given, def.name) ? unwrapLabel(given[def.name]) : undefined, field);
      if (value === undefined) continue;
      if (def.type === TIMER_INTERFACE) {
        if (result.timer)
          throw new PropValueError(`is a second ${TIMER_INTERFACE} prop; a source has at most one timer`);
        result.timer = value as TimerSpec;
      } else if (def.type === HTTP_INTERFACE) {
        if (result.http)
          throw new PropValueError(`is a second ${HTTP_INTERFACE} prop; a source has at most one endpoint`);
        result.http = { propName: def.name, customResponse: def.customResponse === true };
      } else if (def.type === DB_SERVICE) {
        result.dbPropNames.push(def.name);
      }
      const bytes = jsonBytes(value);
      if (bytes > PROP_VALUE_MAX_BYTES) {
        throw new PropValueError(
          `is ${bytes} bytes as JSON; a prop value may be at most ${PROP_VALUE_MAX_BYTES} bytes`,
        );
      }
      result.values[def.name] = value;
      if (isSecret(def)) result.secretNames.push(def.name);
    } catch (error) {
      issues.push(...issuesOf(error, field));
    }
  }
  for (const name of Object.keys(given)) {
    if (!known.has(name))
      issues.push({ field: `configured_props.${name}`, message: "is not a prop of this component" });
  }

  if (issues.length > 0) {
    const summary = issues.map((issue) => `${issue.field}: ${issue.message}`).join("; ");
    throw new DomainError("validation", summary, issues);
  }
  return result;
}

function issuesOf(error: unknown, field: string): FieldIssue[] {
  if (error instanceof PropValueError) return [{ field, message: error.message }];
  if (isDomainError(error) && error.code === "validation") {
    return error.issues && error.issues.length > 0 ? error.issues : [{ field, message: error.message }];
  }
  throw error;
}

/** Returns the value to store for one prop, or `undefined` when it has none. */
function validateProp(def: PropDescription, raw: Json | undefined, field: string): Json | undefined {
  if (def.type === UNKNOWN_TYPE) {
    throw new PropValueError(
      "has no type: the component code gives it none, or a propDefinition that cannot be resolved",
    );
  }
  if (def.type === "alert") {
    if (raw !== undefined) throw new PropValueError("is an alert and takes no value");
    return undefined;
  }
  if (def.static !== undefined) {
    if (raw !== undefined && raw !== null && JSON.stringify(raw) !== JSON.stringify(def.static)) {
      throw new PropValueError(`is static: its value is always ${JSON.stringify(def.static)}`);
    }
    return def.static;
  }

  switch (def.type) {
    case HTTP_INTERFACE:
      if (raw !== undefined && raw !== null && !isObject(raw))
        throw new PropValueError("must be an object ({}) or absent");
      return {};
    case DB_SERVICE:
      if (raw !== undefined && raw !== null && !isEmptyDbValue(raw))
        throw new PropValueError("is a $.service.db and takes no value");
      return {};
    case TIMER_INTERFACE:
      return validateTimer(def, raw, field);
  }

  const absent = raw === undefined || (raw === null && def.type !== "any");
  if (absent) {
    if (def.default !== undefined) {
      try {
        return checkValue(def, def.default);
      } catch (error) {
        if (error instanceof PropValueError)
          throw new PropValueError(`has an invalid default in the component code: ${error.message}`);
        throw error;
      }
    }
    if (def.optional === true || OPTIONAL_TYPES.has(def.type)) return undefined;
    throw new PropValueError("is required");
  }
  return checkValue(def, raw);
}

/** Types never required: they need resources (accounts, stores) the caller may set up later. */
const OPTIONAL_TYPES = new Set(["app", "data_store", "http_request"]);

function isEmptyDbValue(raw: Json): boolean {
  if (!isObject(raw)) return false;
  const keys = Object.keys(raw);
  return keys.length === 0 || (keys.length === 1 && raw.type === DB_SERVICE);
}

function validateTimer(def: PropDescription, raw: Json | undefined, field: string): JsonObject {
  const value = raw === undefined || raw === null ? def.default : raw;
  if (value === undefined || value === null) {
    throw new PropValueError("is required: give {intervalSeconds} or {cron, timezone?}");
  }
  // validateTimerSpec also accepts the read-back form `{cron: null, interval_seconds: 60}`.
  const spec = validateTimerSpec(value, field);
  const out: JsonObject = {};
  for (const [key, item] of Object.entries(spec)) if (item !== undefined) out[key] = item;
  return out;
}

function checkValue(def: PropDescription, value: Json): Json {
  if (def.type.endsWith("[]")) {
    const itemType = def.type.slice(0, -2);
    if (!Array.isArray(value)) throw new PropValueError(`must be an array of ${itemType} values`);
    const items = value.map((item) => unwrapLabel(item) ?? null);
    items.forEach((item, index) => {
      try {
        if (SCALAR_TYPES.has(itemType)) checkScalar(itemType, def, item);
        checkOption(def, item);
      } catch (error) {
        if (error instanceof PropValueError) throw new PropValueError(`item ${index}: ${error.message}`);
        throw error;
      }
    });
    return items;
  }
  if (SCALAR_TYPES.has(def.type)) {
    checkScalar(def.type, def, value);
    checkOption(def, value);
    return value;
  }
  switch (def.type) {
    case "object":
    case "data_store":
    case "http_request":
      if (!isObject(value)) throw new PropValueError("must be an object");
      return value;
    case "app":
      if (!isObject(value) || typeof value.authProvisionId !== "string" || !value.authProvisionId.startsWith("apn_")) {
        throw new PropValueError('must be {"authProvisionId": "apn_..."}, a connected account');
      }
      return value;
    default:
      // `any`, and types the spec does not list: any JSON value, still bound by static options.
      checkOption(def, value);
      return value;
  }
}

const SCALAR_TYPES = new Set(["boolean", "integer", "string"]);

function checkScalar(type: string, def: PropDescription, value: Json): void {
  if (type === "boolean") {
    if (typeof value !== "boolean") throw new PropValueError("must be a boolean");
  } else if (type === "integer") {
    if (typeof value !== "number" || !Number.isSafeInteger(value)) throw new PropValueError("must be an integer");
    if (def.min !== undefined && value < def.min) throw new PropValueError(`must be at least ${def.min}`);
    if (def.max !== undefined && value > def.max) throw new PropValueError(`must be at most ${def.max}`);
  } else if (typeof value !== "string") {
    throw new PropValueError("must be a string");
  }
}

function checkOption(def: PropDescription, value: Json): void {
  if (!def.options || def.options.length === 0) return;
  const allowed = def.options.map(optionValue);
  const text = JSON.stringify(value);
  if (allowed.some((option) => JSON.stringify(option) === text)) return;
  const shown = allowed.slice(0, 10).map((option) => JSON.stringify(option));
  throw new PropValueError(`must be one of ${shown.join(", ")}${allowed.length > 10 ? ", ..." : ""}`);
}

/** Options are plain values or `{label, value}`. */
function optionValue(option: Json): Json {
  return isObject(option) && has(option, "value") ? (option.value as Json) : option;
}

/**
 * Values stored with their label, `{__lv: {label, value}}` (or `{__lv: [{label, value}, ...]}`
 * for arrays), stand for their value (real-behaviour.md §1.10).
 */
function unwrapLabel(value: Json | undefined): Json | undefined {
  if (!isObject(value) || !has(value, "__lv")) return value;
  const labelled = value.__lv as Json;
  if (Array.isArray(labelled)) return labelled.map(optionValue);
  return optionValue(labelled);
}

function isSecret(def: PropDescription): boolean {
  return def.secret === true && def.type === "string";
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
  for (const def of dynamic.values()) if (!staticNames.has(def.name)) merged.push(def);
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

export interface InterfaceContext {
  /** URL of the source's HTTP endpoint, when it has one. */
  endpointUrl?: string;
  /** The source's timer, when it has one; otherwise the stored timer prop value. */
  timer?: TimerSpec;
}

/**
 * The `configured_props` of a Source resource: timer as `{cron, interval_seconds}` (plus
 * `timezone` when set), http as `{endpoint_url}`, db as `{type: "$.service.db"}`, others as
 * stored. Secret values are never returned, not even sealed; alerts have none. Stored values of
 * props no longer defined are kept, except sealed ones.
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
    const value = stored[def.name];
    switch (def.type) {
      case TIMER_INTERFACE: {
        const timer = ctx.timer ?? asTimer(value);
        if (!timer) break;
        out[def.name] = {
          cron: timer.cron ?? null,
          interval_seconds: timer.intervalSeconds ?? null,
          ...(timer.timezone !== undefined ? { timezone: timer.timezone } : {}),
        };
        break;
      }
      case HTTP_INTERFACE:
        out[def.name] = { endpoint_url: ctx.endpointUrl ?? null };
        break;
      case DB_SERVICE:
        out[def.name] = { type: DB_SERVICE };
        break;
      case "alert":
        break;
      default:
        if (value !== undefined && !isSecret(def) && !isSealed(value)) out[def.name] = value;
    }
  }
  for (const [name, value] of Object.entries(stored)) {
    if (!defined.has(name) && !isSealed(value)) out[name] = value;
  }
  return out;
}

function asTimer(value: Json | undefined): TimerSpec | undefined {
  if (!isObject(value)) return undefined;
  const timer: TimerSpec = {};
  if (typeof value.intervalSeconds === "number") timer.intervalSeconds = value.intervalSeconds;
  if (typeof value.cron === "string") timer.cron = value.cron;
  if (typeof value.timezone === "string") timer.timezone = value.timezone;
  return timer.intervalSeconds !== undefined || timer.cron !== undefined ? timer : undefined;
}

/** Whether a stored value is a sealed secret, `{ [SEALED_SECRET]: "<ciphertext>" }`. */
export function isSealed(value: Json | undefined): value is { [SEALED_SECRET]: string } {
  return isObject(value) && typeof value[SEALED_SECRET] === "string" && Object.keys(value).length === 1;
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
 * What `Invocation.props` and `propTypes` carry (runtime-layer/protocol.ts): http as
 * `{endpoint, customResponse}`, timer as `{type: "$.interface.timer", ...config}`, db as
 * `{type: "$.service.db"}`, every other prop its (opened) value. `propTypes` names every prop
 * except alerts, also those without a value (an app prop without an account still has methods).
 */
export function runtimeProps(
  defs: PropDescription[],
  openedValues: Record<string, Json>,
  ctx: InterfaceContext,
): { props: Record<string, Json>; propTypes: Record<string, string> } {
  const props: Record<string, Json> = {};
  const propTypes: Record<string, string> = {};
  for (const def of defs) {
    if (def.type === "alert") continue;
    propTypes[def.name] = def.type;
    const value = openedValues[def.name];
    switch (def.type) {
      case HTTP_INTERFACE:
        props[def.name] = { endpoint: ctx.endpointUrl ?? null, customResponse: def.customResponse === true };
        break;
      case TIMER_INTERFACE:
        props[def.name] = { type: TIMER_INTERFACE, ...(ctx.timer ?? asTimer(value) ?? {}) };
        break;
      case DB_SERVICE:
        props[def.name] = { type: DB_SERVICE };
        break;
      default:
        if (value !== undefined) props[def.name] = value;
    }
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
