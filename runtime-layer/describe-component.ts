/**
 * Turns a component's exported object into plain JSON metadata. Runs inside the sandbox child
 * (`sandbox-entry.ts`), after the user's module has been evaluated there: nothing here may assume
 * the object is well formed, and nothing of it (functions, getters' surprises, cycles) may leak
 * into the answer, which crosses the IPC channel as JSON.
 */

/** A JSON value, as it crosses the sandbox's IPC channel. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** One prop of a component, in declaration order. Only the attributes the code set are present. */
export interface PropDescription {
  name: string;
  /** The prop type (`string`, `integer[]`, `app`, `$.interface.http`, ...). */
  type: string;
  label?: string;
  description?: string;
  default?: Json;
  optional?: boolean;
  secret?: boolean;
  min?: number;
  max?: number;
  /** Static choices only; an `options` method is reported as `remoteOptions` instead. */
  options?: Json[];
  remoteOptions?: true;
  /** `$.interface.http` props. */
  customResponse?: boolean;
  /** App props: the app's name slug. */
  app?: string;
  /**
   * App props: the fields of its `$auth` the code reads (`this.$auth.<field>` in the app's
   * functions, `this.<prop>.$auth.<field>` in the component's), sorted; absent when none. Tells
   * trusted code the app needs a connected account (docs/components.md "Apps and accounts").
   */
  authFields?: string[];
  /** Alert props. */
  alertType?: string;
  content?: string;
  static?: Json;
  reloadProps?: boolean;
  useQuery?: boolean;
  disabled?: boolean;
  hidden?: boolean;
}

/** What the API keeps of a component's code: the metadata, never the code's behaviour. */
export interface ComponentDescription {
  key?: string;
  name?: string;
  version?: string;
  description?: string;
  /** A component without `type` is a source. */
  type: "source" | "action";
  dedupe?: string;
  /** Present hooks among `deploy`, `activate`, `deactivate`. */
  hooks: string[];
  methods: string[];
  hasRun: boolean;
  hasAdditionalProps: boolean;
  props: PropDescription[];
}

export const HOOK_NAMES = ["deploy", "activate", "deactivate"] as const;
/** A prop description's attributes by type; `protocol-parsers.ts` checks a description against the same lists. */
export const STRING_ATTRIBUTES = ["label", "description", "app", "alertType", "content"] as const;
export const BOOLEAN_ATTRIBUTES = [
  "optional",
  "secret",
  "customResponse",
  "reloadProps",
  "useQuery",
  "disabled",
  "hidden",
] as const;
export const NUMBER_ATTRIBUTES = ["min", "max"] as const;

/** Type reported for a prop whose code (or whose unresolvable `propDefinition`) gave none. */
export const UNKNOWN_PROP_TYPE = "unknown";

type Bag = Record<string, unknown>;

function isBag(value: unknown): value is Bag {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Copies `value` as `JSON.stringify` would carry it: a `toJSON` method gives the value (a `URL`
 * its text, a `Buffer` `{type, data}`, a `Date` its ISO text, a library's date or decimal what it
 * chose), boxed primitives are unwrapped, functions and symbols are dropped (in arrays they become
 * `null`), non-finite numbers become null. Where `JSON.stringify` would throw it does not: a
 * cycle is cut and a bigint is dropped. A `__proto__` key stays an own key of the copy. Returns
 * `undefined` when nothing of the value survives.
 */
export function toJson(value: unknown, seen: Set<object> = new Set(), key = ""): Json | undefined {
  if ((typeof value === "object" && value !== null) || typeof value === "bigint") {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") value = toJSON.call(value, key);
  }
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  if (typeof value !== "object") return undefined; // functions, symbols, bigint, undefined
  if (value instanceof Number || value instanceof String || value instanceof Boolean) {
    return toJson(value.valueOf(), seen);
  }
  if (seen.has(value)) return undefined;
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((item, index) => toJson(item, seen, String(index)) ?? null);
    const out: { [key: string]: Json } = {};
    for (const [name, item] of Object.entries(value)) {
      const json = toJson(item, seen, name);
      if (json === undefined) continue;
      // `__proto__` is data here (JSON.parse makes it an own key); assigned, it would become the
      // copy's prototype and vanish from the event.
      if (name === "__proto__")
        Object.defineProperty(out, name, { value: json, enumerable: true, writable: true, configurable: true });
      else out[name] = json;
    }
    return out;
  } finally {
    // Only ancestors count as a cycle; the same object twice side by side is fine.
    seen.delete(value);
  }
}

/**
 * Describes a component from the object its module exports (the default export of an ES module,
 * `module.exports` of a CommonJS one).
 *
 * Tolerant by design: unknown top-level keys (`sampleEmit`) and unknown prop attributes
 * (`withLabel`) are ignored, attributes of the wrong type are left out. A prop with no type is
 * reported as {@link UNKNOWN_PROP_TYPE}, so the caller decides whether that is an error.
 *
 * @throws TypeError when `exported` is not an object (no default export, a bare function, ...).
 */
export function describeComponent(exported: unknown): ComponentDescription {
  if (!isBag(exported)) {
    throw new TypeError(
      `the module must export a component object (export default { ... } or module.exports = { ... }), got ${describeKind(exported)}`,
    );
  }
  const description: ComponentDescription = {
    ...stringFields(exported),
    type: exported.type === "action" ? "action" : "source",
    hooks: functionNames(exported.hooks).filter((name) => (HOOK_NAMES as readonly string[]).includes(name)),
    methods: functionNames(exported.methods),
    hasRun: typeof exported.run === "function",
    hasAdditionalProps: typeof exported.additionalProps === "function",
    props: describeProps(exported.props),
  };
  for (const prop of description.props) {
    if (prop.type !== "app") continue;
    const declared = isBag(exported.props) ? exported.props[prop.name] : undefined;
    const fields = authFieldsRead(declared, prop.name, exported);
    if (fields.length > 0) prop.authFields = fields;
  }
  return description;
}

/** At most this many `$auth` fields are reported per app prop. */
const AUTH_FIELDS_MAX = 20;
const FIELD = String.raw`([A-Za-z_$][\w$]*)`;
/** `$auth.x`, `$auth?.x`, `$auth["x"]` after `prefix`, and `{ x, y: z } = <prefix>$auth`. */
function authReads(prefix: string): RegExp[] {
  return [
    new RegExp(String.raw`${prefix}\$auth\s*\??\.\s*${FIELD}`, "g"),
    new RegExp(String.raw`${prefix}\$auth\s*\??\.?\[\s*["'\`]([^"'\`]{1,100})["'\`]\s*\]`, "g"),
    new RegExp(String.raw`\{([^{}=]{1,500})\}\s*=\s*${prefix}\$auth\b`, "g"),
  ];
}
const APP_READS = authReads(String.raw`this\s*\.\s*`);

/** The text of the functions in `value`, a few levels down (methods, propDefinitions' options). */
function functionTexts(value: unknown, depth = 3, out: string[] = []): string[] {
  if (typeof value === "function") {
    try {
      out.push(Function.prototype.toString.call(value));
    } catch {
      // A proxy that refuses: nothing to read.
    }
    return out;
  }
  if (!isBag(value) || depth === 0) return out;
  for (const key of Object.keys(value)) {
    try {
      functionTexts(value[key], depth - 1, out);
    } catch {
      // A getter that throws.
    }
  }
  return out;
}

function namesIn(destructured: string): string[] {
  return destructured
    .split(",")
    .map((part) => part.split(":")[0]?.trim() ?? "")
    .filter((name) => /^[A-Za-z_$][\w$]*$/.test(name));
}

/**
 * The `$auth` fields an app prop's code reads: in the app object's own functions (`this.$auth`),
 * and in the component's (`this.<propName>.$auth`). Read from the functions' source text, so it
 * sees what the code says, not what a run would reach; enough to say an account is needed.
 */
function authFieldsRead(app: unknown, propName: string, component: Bag): string[] {
  const fields = new Set<string>();
  const collect = (texts: string[], patterns: RegExp[]) => {
    for (const text of texts) {
      for (const pattern of patterns) {
        for (const match of text.matchAll(pattern)) {
          const captured = match[1] ?? "";
          for (const name of pattern === patterns[2] ? namesIn(captured) : [captured]) fields.add(name);
        }
      }
    }
  };
  collect(functionTexts(app), APP_READS);
  const escaped = propName.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const componentTexts = functionTexts({ run: component.run, hooks: component.hooks, methods: component.methods });
  collect(componentTexts, authReads(String.raw`this\s*\.\s*${escaped}\s*\??\.\s*`));
  return [...fields].sort().slice(0, AUTH_FIELDS_MAX);
}

function stringFields(
  exported: Bag,
): Pick<ComponentDescription, "key" | "name" | "version" | "description" | "dedupe"> {
  const fields: Pick<ComponentDescription, "key" | "name" | "version" | "description" | "dedupe"> = {};
  for (const field of ["key", "name", "version", "description", "dedupe"] as const) {
    const value = exported[field];
    if (typeof value === "string") fields[field] = value;
  }
  return fields;
}

function describeKind(value: unknown): string {
  if (value === undefined) return "nothing (no default export)";
  if (value === null) return "null";
  return Array.isArray(value) ? "an array" : `a ${typeof value}`;
}

function functionNames(value: unknown): string[] {
  if (!isBag(value)) return [];
  return Object.keys(value).filter((name) => typeof value[name] === "function");
}

/**
 * Describes a `props` object (a component's, or what `additionalProps` returned) in declaration
 * order; anything but an object describes as no props.
 */
export function describeProps(props: unknown): PropDescription[] {
  if (!isBag(props)) return [];
  // Object.entries keeps insertion order for string keys, which is declaration order after spreads.
  return Object.entries(props).map(([name, prop]) => describeProp(name, prop));
}

function describeProp(name: string, declared: unknown): PropDescription {
  // Bare strings: `http: "$.interface.http"`, `db: "$.service.db"`, legacy `secret: "string"`.
  if (typeof declared === "string") return { name, type: declared };
  if (!isBag(declared)) return { name, type: UNKNOWN_PROP_TYPE };

  const prop = resolvePropDefinition(declared);
  const type = typeof prop.type === "string" ? prop.type : UNKNOWN_PROP_TYPE;
  // An app prop is the app object itself: its propDefinitions and methods are not prop metadata.
  if (type === "app") return typeof prop.app === "string" ? { name, type, app: prop.app } : { name, type };
  const out: PropDescription = { name, type };

  for (const attribute of STRING_ATTRIBUTES) {
    const value = prop[attribute];
    if (typeof value === "string") out[attribute] = value;
  }
  for (const attribute of BOOLEAN_ATTRIBUTES) {
    const value = prop[attribute];
    if (typeof value === "boolean") out[attribute] = value;
  }
  for (const attribute of NUMBER_ATTRIBUTES) {
    const value = prop[attribute];
    if (typeof value === "number" && Number.isFinite(value)) out[attribute] = value;
  }

  if ("default" in prop) {
    const value = toJson(prop.default);
    if (value !== undefined) out.default = value;
  } else if (type === "$.interface.timer" && typeof prop.intervalSeconds === "number") {
    // Legacy timers put the interval on the prop itself (PD:components/rss/rss.js).
    out.default = { intervalSeconds: prop.intervalSeconds };
  }
  if ("static" in prop) {
    const value = toJson(prop.static);
    if (value !== undefined) out.static = value;
  }

  if (typeof prop.options === "function") out.remoteOptions = true;
  else if (Array.isArray(prop.options)) out.options = prop.options.map((option) => toJson(option) ?? null);

  return out;
}

/**
 * Merges `propDefinition: [app, name, inputValues?]` with the definition found in the app
 * object's `propDefinitions`; the prop's own attributes win. An unresolvable reference leaves the
 * prop as written: the definition's attributes then simply do not appear.
 */
function resolvePropDefinition(prop: Bag): Bag {
  const reference = prop.propDefinition;
  if (!Array.isArray(reference)) return prop;
  const [app, definitionName] = reference as unknown[];
  if (!isBag(app) || typeof definitionName !== "string") return prop;
  const definitions = app.propDefinitions;
  const definition = isBag(definitions) ? definitions[definitionName] : undefined;
  if (!isBag(definition)) return prop;
  const { propDefinition: _reference, ...own } = prop;
  return { ...definition, ...own };
}
