/**
 * The table of prop types (component-model.md "Prop types"): one entry per type says how a
 * configured value is checked and stored, what a Source's `configured_props` shows of it, and
 * what a run receives. `props.ts` walks a component's props through it. A new prop type is one
 * entry in {@link PROP_TYPES} (docs/components.md "Adding a prop type").
 *
 * Pure: no I/O.
 */
import type { Json, PropDescription } from "#runtime/protocol";
import { SEALED_SECRET, type StoredPropValue, type TimerSpec } from "./component-model.ts";
import { ID_PREFIXES, idPattern } from "./ids.ts";
import { forbiddenCharacterIn } from "./names.ts";
import { validateTimerSpec } from "./timer-schedule.ts";

export const HTTP_INTERFACE = "$.interface.http";
export const TIMER_INTERFACE = "$.interface.timer";
export const DB_SERVICE = "$.service.db";
/** The type `describeComponent` reports for a prop whose code gives none. */
export const UNKNOWN_TYPE = "unknown";

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

/** What a source has beside its stored values, for the props that stand for it. */
export interface InterfaceContext {
  /** URL of the source's HTTP endpoint, when it has one. */
  endpointUrl?: string;
  /** The source's timer, when it has one; otherwise the stored timer prop value. */
  timer?: TimerSpec;
}

/** A problem with one prop's value, before it is given its field name (`configured_props.<name>`). */
export class PropValueError extends Error {}

/** What Sluice does with the props of one type. */
export interface PropType {
  /**
   * The value to store for a prop, from the value the request (or an update's kept value) gives:
   * `given` has its label wrapper taken off and is `undefined` when absent. Returns `undefined`
   * when the prop has no value.
   * @throws PropValueError, or DomainError `validation` naming fields under `field`.
   */
  validate(def: PropDescription, given: Json | undefined, field: string): Json | undefined;
  /**
   * What a validated value gives the source beside the stored value (its timer, its endpoint, its
   * db), added to `into`.
   * @throws PropValueError when the source cannot take it (a second timer).
   */
  record?(into: ValidatedProps, def: PropDescription, value: Json): void;
  /** The prop in a Source's `configured_props`; `undefined` leaves it out. */
  view(def: PropDescription, stored: StoredPropValue | undefined, ctx: InterfaceContext): Json | undefined;
  /** The prop in `Invocation.props` (secrets opened); `undefined` leaves it out. */
  runValue(def: PropDescription, opened: Json | undefined, ctx: InterfaceContext): Json | undefined;
  /** Whether `secret: true` seals the value (component-model.md: string props only). */
  readonly secretable: boolean;
  /**
   * A prop only shown to the user (an alert): it holds no value, an update carries none to new
   * code, and a run is not told of it (no `propTypes` entry).
   */
  readonly displayOnly: boolean;
}

type JsonObject = { [key: string]: Json };

export const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const has = (value: object, key: string) => Object.hasOwn(value, key);

/** Whether a stored value is a sealed secret, `{ [SEALED_SECRET]: "<ciphertext>" }`. */
export function isSealed(value: Json | undefined): value is { [SEALED_SECRET]: string } {
  return isObject(value) && typeof value[SEALED_SECRET] === "string" && Object.keys(value).length === 1;
}

/** Options are plain values or `{label, value}`. */
function optionValue(option: Json): Json {
  return isObject(option) && has(option, "value") ? (option.value as Json) : option;
}

/**
 * Values stored with their label, `{__lv: {label, value}}` (or `{__lv: [{label, value}, ...]}`
 * for arrays), stand for their value (real-behaviour.md §1.10).
 */
export function unwrapLabel(value: Json | undefined): Json | undefined {
  if (!isObject(value) || !has(value, "__lv")) return value;
  const labelled = value.__lv as Json;
  if (Array.isArray(labelled)) return labelled.map(optionValue);
  return optionValue(labelled);
}

// ---------------------------------------------------------------------------------------------
// Checks of a present value (given, or a default from the code): each returns what to store.
// ---------------------------------------------------------------------------------------------

type Check = (def: PropDescription, value: Json) => Json;

/**
 * `any`, and types the spec does not list: any JSON value. Static `options` are the drop-down's
 * choices, not a bound: the original takes any value of the prop's type, and registry components
 * rely on it ("choose one of the options, or use a custom index"; a status code not listed).
 */
const anyJson: Check = (_def, value) => value;

const string: Check = (def, value) => {
  if (typeof value !== "string") throw new PropValueError("must be a string");
  return anyJson(def, value);
};

const boolean: Check = (def, value) => {
  if (typeof value !== "boolean") throw new PropValueError("must be a boolean");
  return anyJson(def, value);
};

const integer: Check = (def, value) => {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) throw new PropValueError("must be an integer");
  if (def.min !== undefined && value < def.min) throw new PropValueError(`must be at least ${def.min}`);
  if (def.max !== undefined && value > def.max) throw new PropValueError(`must be at most ${def.max}`);
  return anyJson(def, value);
};

const object: Check = (_def, value) => {
  if (!isObject(value)) throw new PropValueError("must be an object");
  return value;
};

const DATA_STORE_ID = new RegExp(idPattern(ID_PREFIXES.dataStore));
/** Longest data store name a prop may give, in characters. */
export const DATA_STORE_NAME_MAX_CHARS = 128;

/** A data store: its id (`"ds_..."`), `{"name": "..."}` (found or created at run time), or `{}` (its own). */
const dataStoreRef: Check = (_def, value) => {
  if (typeof value === "string" && DATA_STORE_ID.test(value)) return value;
  if (isObject(value) && Object.keys(value).length === 0) return value;
  if (isObject(value) && Object.keys(value).length === 1 && typeof value.name === "string") {
    const name = value.name.trim();
    const hidden = forbiddenCharacterIn(name);
    if (hidden)
      throw new PropValueError(
        `a data store name must not contain NUL or bidirectional control characters (found ${hidden})`,
      );
    if (name !== "" && name.length <= DATA_STORE_NAME_MAX_CHARS) return { name };
  }
  throw new PropValueError(
    `must be a data store id ("ds_..."), or {"name": "..."} (1 to ${DATA_STORE_NAME_MAX_CHARS} characters) to use the workspace's store of that name`,
  );
};

const connectedAccount: Check = (_def, value) => {
  if (!isObject(value) || typeof value.authProvisionId !== "string" || !value.authProvisionId.startsWith("apn_")) {
    throw new PropValueError('must be {"authProvisionId": "apn_..."}, a connected account');
  }
  // Only the id is kept: `$auth` comes from the account at each use, never from the request.
  return { authProvisionId: value.authProvisionId };
};

const isFieldList = (value: Json): boolean =>
  Array.isArray(value) && value.every((field) => isObject(field) && typeof field.name === "string");

/**
 * An `http_request` value in the form `@pipedream/types` declares (`DefaultHttpRequestPropConfig`):
 * `url` and `method` strings, `headers` and `params` as `{name, value}` lists (or plain objects),
 * `auth` and `body` objects. `execute()` reads it (runtime-layer/http-request-prop.ts).
 */
const httpRequestConfig: Check = (_def, value) => {
  if (!isObject(value)) throw new PropValueError("must be an object: {url, method, headers, params, auth, body}");
  for (const key of ["url", "method"] as const) {
    if (value[key] !== undefined && typeof value[key] !== "string") throw new PropValueError(`${key} must be a string`);
  }
  if (typeof value.url === "string" && value.url !== "" && !/^https?:\/\//i.test(value.url)) {
    throw new PropValueError("url must be an http or https URL");
  }
  for (const key of ["headers", "params"] as const) {
    const list = value[key];
    if (list !== undefined && !isObject(list) && !isFieldList(list)) {
      throw new PropValueError(`${key} must be a list of {name, value} or an object`);
    }
  }
  for (const key of ["auth", "body"] as const) {
    if (value[key] !== undefined && !isObject(value[key])) throw new PropValueError(`${key} must be an object`);
  }
  return value;
};

/** The alert types of component-model.md "Alert prop". */
export const ALERT_TYPES = ["info", "neutral", "warning", "error"] as const;

/** `<type>[]`: an array, each item (label wrapper taken off) checked as `item`. */
const arrayOf =
  (item: Check): Check =>
  (def, value) => {
    const itemType = def.type.slice(0, -2);
    if (!Array.isArray(value)) throw new PropValueError(`must be an array of ${itemType} values`);
    const items = value.map((entry) => unwrapLabel(entry) ?? null);
    items.forEach((entry, index) => {
      try {
        item(def, entry);
      } catch (error) {
        if (error instanceof PropValueError) throw new PropValueError(`item ${index}: ${error.message}`);
        throw error;
      }
    });
    return items;
  };

// ---------------------------------------------------------------------------------------------
// Entry builders.
// ---------------------------------------------------------------------------------------------

type Validate = PropType["validate"];

/** A `static` prop accepts only its static value, and always has it. */
const fixedByStatic =
  (validate: Validate): Validate =>
  (def, given, field) => {
    if (def.static === undefined) return validate(def, given, field);
    if (given !== undefined && given !== null && JSON.stringify(given) !== JSON.stringify(def.static)) {
      throw new PropValueError(`is static: its value is always ${JSON.stringify(def.static)}`);
    }
    return def.static;
  };

interface ValueRules {
  /** The check of a value that is present, given or a default. */
  readonly check: Check;
  /** Never required: the value needs a resource (an account, a store) set up later. @default false */
  readonly neverRequired?: boolean;
  /** `null` is a value (`any`), not an absent one. @default false */
  readonly nullIsValue?: boolean;
  /** @default false */
  readonly secretable?: boolean;
}

/**
 * A prop whose value the user gives: absent (or `null`) takes the code's `default`, else is
 * required unless `optional`; stored as checked; shown and handed to a run as stored (never a
 * secret or a sealed value in a view).
 */
function userValue(rules: ValueRules): PropType {
  const secretable = rules.secretable === true;
  return {
    validate: fixedByStatic((def, given) => {
      const absent = given === undefined || (given === null && rules.nullIsValue !== true);
      if (!absent) return rules.check(def, given);
      if (def.default !== undefined) {
        try {
          return rules.check(def, def.default);
        } catch (error) {
          if (error instanceof PropValueError)
            throw new PropValueError(`has an invalid default in the component code: ${error.message}`);
          throw error;
        }
      }
      if (def.optional === true || rules.neverRequired === true) return undefined;
      throw new PropValueError("is required");
    }),
    view: (def, stored) =>
      stored === undefined || isSealed(stored) || (secretable && def.secret === true) ? undefined : stored,
    runValue: (_def, opened) => opened,
    secretable,
    displayOnly: false,
  };
}

/** The flags of a prop that holds a value Sluice makes (the interfaces): never sealed, always seen by a run. */
const MADE_BY_SLUICE = { secretable: false, displayOnly: false } as const;

function asTimer(value: Json | undefined): TimerSpec | undefined {
  if (!isObject(value)) return undefined;
  const timer: TimerSpec = {};
  if (typeof value.intervalSeconds === "number") timer.intervalSeconds = value.intervalSeconds;
  if (typeof value.cron === "string") timer.cron = value.cron;
  if (typeof value.timezone === "string") timer.timezone = value.timezone;
  return timer.intervalSeconds !== undefined || timer.cron !== undefined ? timer : undefined;
}

function validateTimer(def: PropDescription, given: Json | undefined, field: string): JsonObject {
  const value = given === undefined || given === null ? def.default : given;
  if (value === undefined || value === null) {
    throw new PropValueError("is required: give {intervalSeconds} or {cron, timezone?}");
  }
  // validateTimerSpec also accepts the read-back form `{cron: null, interval_seconds: 60}`.
  const spec = validateTimerSpec(value, field);
  const out: JsonObject = {};
  for (const [key, item] of Object.entries(spec)) if (item !== undefined) out[key] = item;
  return out;
}

function isEmptyDbValue(given: Json): boolean {
  if (!isObject(given)) return false;
  const keys = Object.keys(given);
  return keys.length === 0 || (keys.length === 1 && given.type === DB_SERVICE);
}

const isGiven = (given: Json | undefined): given is Json => given !== undefined && given !== null;

// ---------------------------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------------------------

const HTTP_REQUEST_VALUE = userValue({ check: httpRequestConfig, neverRequired: true });

/**
 * Every prop type Sluice knows, by the `type` a prop declares. Types the spec does not list
 * (`$.airtable.baseId`, `sql`, ...) are not here: {@link propTypeOf} gives them any JSON value.
 */
export const PROP_TYPES = {
  string: userValue({ check: string, secretable: true }),
  integer: userValue({ check: integer }),
  boolean: userValue({ check: boolean }),
  "string[]": userValue({ check: arrayOf(string) }),
  "integer[]": userValue({ check: arrayOf(integer) }),
  "boolean[]": userValue({ check: arrayOf(boolean) }),
  object: userValue({ check: object }),
  any: userValue({ check: anyJson, nullIsValue: true }),
  // Checked for its shape here; that it names an account of the workspace for the app, by the
  // use cases (`app-accounts.ts`), which can read the store.
  app: userValue({ check: connectedAccount, neverRequired: true }),
  // Bound to a store of the workspace at run time (`data-stores.ts`); none given: a store of its own.
  data_store: userValue({ check: dataStoreRef, neverRequired: true }),
  http_request: {
    ...HTTP_REQUEST_VALUE,
    // The code's `default` (`{method: "POST"}` in the registry's send-http-request) is the form the
    // original's UI starts from: a value given is laid over it, not in its place.
    validate: (def, given, field) =>
      HTTP_REQUEST_VALUE.validate(
        def,
        isObject(given) && isObject(def.default) ? { ...def.default, ...given } : given,
        field,
      ),
  },

  alert: {
    // Display only: the code's own attributes are checked, since a client shows them as they are.
    validate: (def, given) => {
      if (!(ALERT_TYPES as readonly (string | undefined)[]).includes(def.alertType)) {
        throw new PropValueError(
          `is an alert whose alertType must be one of ${ALERT_TYPES.join(", ")} (the component code gives ${JSON.stringify(def.alertType ?? null)})`,
        );
      }
      if (typeof def.content !== "string" || def.content === "") {
        throw new PropValueError("is an alert whose content must be a non-empty string in the component code");
      }
      if (given !== undefined) throw new PropValueError("is an alert and takes no value");
      return undefined;
    },
    view: () => undefined,
    runValue: () => undefined,
    secretable: false,
    displayOnly: true,
  },

  [HTTP_INTERFACE]: {
    // Any object is accepted and dropped, so a read-back `{endpoint_url}` can be sent again.
    validate: fixedByStatic((_def, given) => {
      if (isGiven(given) && !isObject(given)) throw new PropValueError("must be an object ({}) or absent");
      return {};
    }),
    record(into, def) {
      if (into.http) throw new PropValueError(`is a second ${HTTP_INTERFACE} prop; a source has at most one endpoint`);
      into.http = { propName: def.name, customResponse: def.customResponse === true };
    },
    view: (_def, _stored, ctx) => ({ endpoint_url: ctx.endpointUrl ?? null }),
    runValue: (def, _opened, ctx) => ({
      endpoint: ctx.endpointUrl ?? null,
      customResponse: def.customResponse === true,
    }),
    ...MADE_BY_SLUICE,
  },

  [TIMER_INTERFACE]: {
    validate: fixedByStatic(validateTimer),
    record(into, _def, value) {
      if (into.timer) throw new PropValueError(`is a second ${TIMER_INTERFACE} prop; a source has at most one timer`);
      into.timer = value as TimerSpec;
    },
    view: (_def, stored, ctx) => {
      const timer = ctx.timer ?? asTimer(stored);
      if (!timer) return undefined;
      return {
        cron: timer.cron ?? null,
        interval_seconds: timer.intervalSeconds ?? null,
        ...(timer.timezone !== undefined ? { timezone: timer.timezone } : {}),
      };
    },
    runValue: (_def, opened, ctx) => ({ type: TIMER_INTERFACE, ...(ctx.timer ?? asTimer(opened) ?? {}) }),
    ...MADE_BY_SLUICE,
  },

  [DB_SERVICE]: {
    validate: fixedByStatic((_def, given) => {
      if (isGiven(given) && !isEmptyDbValue(given)) throw new PropValueError(`is a ${DB_SERVICE} and takes no value`);
      return {};
    }),
    record(into, def) {
      into.dbPropNames.push(def.name);
    },
    // The runtime builds `get`/`set` over the snapshot the invocation carries.
    view: () => ({ type: DB_SERVICE }),
    runValue: () => ({ type: DB_SERVICE }),
    ...MADE_BY_SLUICE,
  },

  // The registry's file actions declare `syncDir: {type: "dir", accessMode, sync: true}`, for which
  // the original syncs a File Store with the step's /tmp. Sluice has no File Stores: the prop takes
  // no value and the run is not told of it; the step's /tmp is its sandbox's (or Lambda's) own
  // (docs/components.md "Files in /tmp").
  dir: {
    validate: (_def, given) => {
      if (isGiven(given) && !(isObject(given) && Object.keys(given).length === 0)) {
        throw new PropValueError("is a dir prop (the step's /tmp, made by Sluice) and takes no value");
      }
      return undefined;
    },
    view: () => undefined,
    runValue: () => undefined,
    ...MADE_BY_SLUICE,
  },

  // A prop whose code gives no type, or a propDefinition that cannot be resolved: refused, so a
  // source is never deployed with a prop nobody can configure. What older code stored still shows.
  [UNKNOWN_TYPE]: {
    ...userValue({ check: anyJson }),
    validate: () => {
      throw new PropValueError(
        "has no type: the component code gives it none, or a propDefinition that cannot be resolved",
      );
    },
  },
} as const satisfies Record<string, PropType>;

/** Any JSON value: types the spec does not list (`$.airtable.baseId`, `sql`, ...). */
const UNLISTED = userValue({ check: anyJson });
/** Arrays of anything but a listed scalar (`object[]`): any items. */
const UNLISTED_ARRAY = userValue({ check: arrayOf(anyJson) });

/** The entry of a prop's `type`; a type not in {@link PROP_TYPES} takes any JSON value. */
export function propTypeOf(type: string): PropType {
  // Object.hasOwn: a type named `constructor` or `__proto__` is an unlisted type, not Object's.
  if (Object.hasOwn(PROP_TYPES, type)) return PROP_TYPES[type as keyof typeof PROP_TYPES];
  return type.endsWith("[]") ? UNLISTED_ARRAY : UNLISTED;
}

/** Whether a prop's value is sealed before it is stored and never shown. */
export const isSecretProp = (def: PropDescription): boolean => def.secret === true && propTypeOf(def.type).secretable;
