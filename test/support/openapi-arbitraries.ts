/**
 * Bad requests at volume, generated from the service's own OpenAPI document with fast-check.
 *
 * Every operation of the document is fuzzed without naming it here: path parameters (ids of every
 * prefix, the caller's own and another account's, malformed, odd unicode, very long), query
 * parameters (wrong types, out of range, unknown extras, repeated), bodies derived from the
 * operation's schema (wrong types, missing and extra fields, deep nesting, over the size limit,
 * malformed JSON, wrong content types, lone surrogates and NUL), bad cursors, with and without a
 * key, and other methods. The `/http/{key}` endpoints of sources and workflows and the live
 * streams `/sources/{id}/sse` and `/workflows/{id}/sse` (documented, but fuzzed by their own
 * generators: an endpoint answers as its component does, not in the API's shapes, and a good
 * request to a stream never ends) and unknown paths are fuzzed too.
 *
 * {@link judgeAnswer} says what is wrong with an answer: a 5xx, no answer, or a failure that is not
 * the error shape README "Errors" documents (JSON `{"error", "details"?, "request_id"?}` with an
 * `x-request-id` header).
 */
import { Agent, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import fc from "fast-check";
import { MAX_HTTP_INTERFACE_BODY_BYTES } from "#core/http-run-event";
import { ID_PREFIXES } from "#core/ids";
import { apiClient, inBatches } from "./api-client.ts";
import { eventually } from "./eventually.ts";

// ---------------------------------------------------------------------------------------------
// The document

/** The subset of JSON Schema (OpenAPI 3.1) the generators read. */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  description?: string;
  $ref?: string;
}

interface ParameterObject {
  name: string;
  in: string;
  required?: boolean;
  schema?: JsonSchema;
}

interface OperationObject {
  operationId?: string;
  security?: unknown[];
  parameters?: ParameterObject[];
  requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
  responses?: Record<string, { description?: string; content?: Record<string, unknown> }>;
}

export interface OpenApiDocument {
  paths?: Record<string, Record<string, OperationObject>>;
  components?: { schemas?: Record<string, JsonSchema> };
  security?: unknown[];
}

export interface ApiParameter {
  name: string;
  required: boolean;
  schema: JsonSchema;
}

/** One operation of the document, with `$ref`s resolved. */
export interface ApiOperation {
  operationId: string;
  method: string;
  /** With `{placeholders}`, e.g. `/v1/sources/{id}`. */
  path: string;
  auth: boolean;
  pathParams: ApiParameter[];
  queryParams: ApiParameter[];
  /** The JSON body's schema, when the operation takes one. */
  body?: JsonSchema;
  /** Largest accepted body, read from the 413 answer's description ("Body over 1 MiB"). */
  bodyLimitBytes: number;
  /** It answers an HTML page (a browser lands on it): its refusals are pages too. */
  page: boolean;
}

const DEFAULT_BODY_LIMIT = 1024 * 1024;
const METHODS = ["get", "post", "put", "delete", "patch", "head", "options"];

function resolve(document: OpenApiDocument, schema: JsonSchema | undefined, seen = 0): JsonSchema {
  if (!schema) return {};
  if (schema.$ref && seen < 20) {
    const name = schema.$ref.replace(/^#\/components\/schemas\//, "");
    return resolve(document, document.components?.schemas?.[name], seen + 1);
  }
  const out: JsonSchema = { ...schema };
  if (schema.properties) {
    out.properties = Object.fromEntries(
      Object.entries(schema.properties).map(([name, child]) => [name, resolve(document, child, seen + 1)]),
    );
  }
  if (schema.items) out.items = resolve(document, schema.items, seen + 1);
  for (const key of ["anyOf", "oneOf", "allOf"] as const) {
    if (schema[key]) out[key] = schema[key].map((child) => resolve(document, child, seen + 1));
  }
  return out;
}

function bodyLimitOf(operation: OperationObject): number {
  const text = operation.responses?.["413"]?.description ?? "";
  const found = /(\d+(?:\.\d+)?)\s*(KiB|MiB|KB|MB)/i.exec(text);
  if (!found?.[1] || !found[2]) return DEFAULT_BODY_LIMIT;
  const unit = found[2].toLowerCase().startsWith("m") ? 1024 * 1024 : 1024;
  return Math.round(Number(found[1]) * unit);
}

/** Whether an operation answers a stream (the live stream, fuzzed apart by `streamRequest`). */
const streams = (operation: OperationObject) =>
  Object.values(operation.responses ?? {}).some((response) => response.content?.["text/event-stream"] !== undefined);

/**
 * Whether an operation answers an HTML page (the OAuth callback, which a browser lands on): its
 * refusals are pages too, not the JSON error shape.
 */
const answersPage = (operation: OperationObject) =>
  Object.values(operation.responses ?? {}).some((response) => response.content?.["text/html"] !== undefined);

/** Every JSON operation of an OpenAPI 3.1 document (not the live streams': answers that never end; not the endpoints' or a paused run's URLs, which take any body). */
export function apiOperations(document: OpenApiDocument): ApiOperation[] {
  const operations: ApiOperation[] = [];
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(item)) {
      if (!METHODS.includes(method) || streams(operation) || path === "/http/{key}" || path.startsWith("/flow/"))
        continue;
      const parameters = (operation.parameters ?? []).map((p) => ({
        name: p.name,
        in: p.in,
        required: p.required === true,
        schema: resolve(document, p.schema),
      }));
      const security = operation.security ?? document.security ?? [];
      const bodySchema = operation.requestBody?.content?.["application/json"]?.schema;
      operations.push({
        operationId: operation.operationId ?? `${method} ${path}`,
        method: method.toUpperCase(),
        path,
        auth: security.length > 0,
        pathParams: parameters.filter((p) => p.in === "path"),
        queryParams: parameters.filter((p) => p.in === "query"),
        body: bodySchema ? resolve(document, bodySchema) : undefined,
        bodyLimitBytes: bodyLimitOf(operation),
        page: answersPage(operation),
      });
    }
  }
  return operations;
}

/** The id prefix a parameter's `pattern` demands (`^dc_` gives `dc_`), if any. */
function prefixOf(schema: JsonSchema): string | undefined {
  return schema.pattern ? /^\^([a-z]+_)/.exec(schema.pattern)?.[1] : undefined;
}

// ---------------------------------------------------------------------------------------------
// What the requests aim at

/** Real things to aim at, so that bad input reaches past the lookups. */
export interface FuzzTargets {
  /** A valid API key. */
  apiKey: string;
  /** Ids the key's user owns (any kind: matched to parameters by prefix). */
  ownIds?: readonly string[];
  /** Ids of another account, which the key's user must not reach. */
  foreignIds?: readonly string[];
  /** Endpoint keys of HTTP interfaces and workflows' HTTP triggers (`/http/{key}`), of either account. */
  endpointKeys?: readonly string[];
  /** Cursors taken from real pages (`start_cursor`, `end_cursor`), of any list. */
  cursors?: readonly string[];
  /** Names of props of the targets' components, used as keys of free-form objects (`configured_props`). */
  propNames?: readonly string[];
}

/** One request to send. */
export interface FuzzRequest {
  /** The document's operationId, or `live-stream`, `workflow-live-stream`, `endpoint`, `unrouted`. */
  operation: string;
  /** What was chosen, for failure reports. */
  label: string;
  method: string;
  /** Path and query from the server's root, as sent on the request line. */
  target: string;
  headers: Record<string, string>;
  /** A function for large bodies, made only when the request is sent. */
  body?: Buffer | (() => Buffer);
  /** Send the body chunked, without a Content-Length. */
  chunked?: boolean;
  /**
   * What the answer must look like: `api` (REST routes and unknown paths: the error shape and an
   * `x-request-id`), `page` (a route a browser lands on: a refusal is an HTML page, with an
   * `x-request-id`), `stream` (the live stream: the same, or a 200 event stream), `endpoint` (a
   * source's HTTP interface: no 5xx, and its fixed refusals are JSON `{error}`).
   */
  expect: "api" | "page" | "stream" | "endpoint";
  /** A path parameter holds another account's id: the answer must not be a success. */
  foreign?: boolean;
}

// ---------------------------------------------------------------------------------------------
// Values

/** Ids are a prefix and 22 characters of Crockford base32 (functions/core/ids.ts). */
const ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
/** Every id prefix, so ids of the wrong kind are tried everywhere. */
const ALL_PREFIXES = Object.values(ID_PREFIXES);

const idBody = (length = 22) =>
  fc.string({ unit: fc.constantFrom(...ID_ALPHABET), minLength: length, maxLength: length });

/** Bodies of ids shaped like the hosted service's (`p_MOCn3Ez`): any of the accepted alphabet, 1 to 64. */
const opaqueBody = fc.string({ unit: fc.constantFrom(..."ABCMOnz0189_-"), minLength: 1, maxLength: 64 });

/** A well-formed id that exists nowhere: Sluice's own shape, or the hosted service's. */
const wellFormedId = (prefix: string) =>
  fc.oneof({ arbitrary: idBody(), weight: 3 }, { arbitrary: opaqueBody, weight: 1 }).map((body) => `${prefix}${body}`);

const ODD_CONSTANTS = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\ud800",
  "\udfff",
  "x\ud83d",
  "\ud83dx",
  "\ufeff",
  "\ufffe",
  "\uffff",
  "\u202e",
  "\u200b",
  "\u00a0",
  "e\u0301",
  "𝕊𝖑𝖚𝖎𝖈𝖊",
  "👩‍👩‍👧‍👦",
  "ﷺ",
  "null",
  "undefined",
  "NaN",
  "true",
  "-0",
  "[object Object]",
  "__proto__",
  "constructor",
  "prototype",
  "../../../etc/passwd",
  "..",
  ".",
  "%00",
  "%",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template injection attempt, on purpose
  "${process.exit()}",
  "'; DROP TABLE sources; --",
  '"',
  "\\",
  "\r\n",
  "\n\n",
  "\t",
  "<script>alert(1)</script>",
  "$errors",
  "$logs",
  "*",
  "dc_*",
  "p_*",
  "dc_",
  "o_",
  "wh_",
  "DC_0123456789ABCDEFGHJKMN",
];

/** Strings a careless parser trips on: any code point, lone surrogates, NUL, control characters. */
const oddString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...ODD_CONSTANTS), weight: 4 },
  { arbitrary: fc.string({ unit: "binary", maxLength: 40 }), weight: 2 },
  { arbitrary: fc.string({ unit: "grapheme", maxLength: 20 }), weight: 1 },
  {
    arbitrary: fc.string({
      unit: fc.constantFrom("\ud800", "\udc00", "\u0000", "\u0001", "\u001f", "\u007f", "a", "é", "\ufeff", "😀"),
      maxLength: 12,
    }),
    weight: 2,
  },
);

/** Lengths around the limits the service states (64, 128, 200, 1000, 2048, 64 KiB). */
const longString: fc.Arbitrary<string> = fc
  .tuple(
    fc.constantFrom(63, 64, 65, 128, 129, 200, 201, 512, 1000, 1001, 2048, 2049, 4096, 65_537),
    fc.constantFrom("x", "é", "😀", "\u0000"),
  )
  .map(([length, unit]) => unit.repeat(length));

/** Bad cursors: garbage, cursors of the wrong version or with odd sort keys, real ones of other lists. */
function badCursor(targets: FuzzTargets): fc.Arbitrary<string> {
  const wrap = (version: string, key: string) => Buffer.from(`${version}:${key}`, "utf8").toString("base64url");
  const options: fc.Arbitrary<string>[] = [
    oddString,
    fc.base64String({ maxLength: 40 }),
    fc.string({ unit: fc.constantFrom(..."ABCxyz019_-"), maxLength: 600 }),
    fc.tuple(fc.constantFrom("1", "0", "2", "", "1:1"), fc.oneof(oddString, longString)).map(([v, k]) => wrap(v, k)),
    fc
      .tuple(fc.constantFrom("1"), fc.constantFrom("9999999999999-0", "0-0", "-1", "a-b", "\uffff", "%"))
      .map(([v, k]) => wrap(v, k)),
  ];
  if (targets.cursors?.length) options.push(fc.constantFrom(...targets.cursors));
  return fc.oneof(...options);
}

/** A JSON value of any type, small. */
const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false, 0, -0, 1, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, "", [], {}),
  fc.jsonValue({ maxDepth: 2 }),
  oddString,
);

function typesOf(schema: JsonSchema): string[] {
  if (Array.isArray(schema.type)) return schema.type;
  if (schema.type) return [schema.type];
  if (schema.properties) return ["object"];
  return [];
}

/** A value the schema accepts, or nearly (strings anywhere within their length). */
function plausibleValue(schema: JsonSchema, depth = 0): fc.Arbitrary<unknown> {
  if (schema.enum?.length) return fc.constantFrom(...schema.enum);
  if (schema.const !== undefined) return fc.constant(schema.const);
  const choice = schema.anyOf ?? schema.oneOf;
  if (choice?.length) return fc.oneof(...choice.map((s) => plausibleValue(s, depth + 1)));
  const type = typesOf(schema)[0];
  switch (type) {
    case "string": {
      const prefix = prefixOf(schema);
      const max = schema.maxLength ?? 40;
      return fc.oneof(
        prefix ? wellFormedId(prefix) : fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(max, 40) }),
        fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(max, 40) }),
      );
    }
    case "integer":
    case "number":
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1000 });
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case "array":
      return depth > 3 ? fc.constant([]) : fc.array(plausibleValue(schema.items ?? {}, depth + 1), { maxLength: 3 });
    case "object": {
      if (depth > 3) return fc.constant({});
      const properties = schema.properties ?? {};
      if (Object.keys(properties).length === 0)
        return fc.dictionary(fc.string({ maxLength: 8 }), anyJson, { maxKeys: 3 });
      const model = Object.fromEntries(Object.entries(properties).map(([k, s]) => [k, plausibleValue(s, depth + 1)]));
      return fc.record(model, { requiredKeys: (schema.required ?? []).filter((k) => k in model) });
    }
    default:
      return anyJson;
  }
}

/** A value of another JSON type than the schema's, or out of its range. */
function wrongValue(schema: JsonSchema): fc.Arbitrary<unknown> {
  const types = typesOf(schema);
  const others: fc.Arbitrary<unknown>[] = [];
  if (!types.includes("string")) others.push(oddString, fc.constantFrom("1", "true", "{}", "[]", ""));
  if (!types.includes("integer") && !types.includes("number"))
    others.push(fc.constantFrom(0, -1, 1.5, 1e308, Number.MAX_SAFE_INTEGER + 2, -0));
  if (!types.includes("boolean")) others.push(fc.boolean());
  if (!types.includes("null")) others.push(fc.constant(null));
  if (!types.includes("array")) others.push(fc.array(anyJson, { maxLength: 3 }));
  if (!types.includes("object")) others.push(fc.dictionary(fc.string({ maxLength: 6 }), anyJson, { maxKeys: 3 }));
  if (types.includes("integer") || types.includes("number")) {
    const below = (schema.minimum ?? 0) - 1;
    const above = (schema.maximum ?? 1e9) + 1;
    others.push(fc.constantFrom(below, above, 0.5, -(2 ** 63), 2 ** 64));
  }
  if (types.includes("string") && schema.maxLength !== undefined) {
    others.push(fc.constant("y".repeat(schema.maxLength + 1)));
  }
  return fc.oneof(...others);
}

/** A field value of a body: plausible, of the wrong type, odd, very long. */
function fieldValue(schema: JsonSchema, targets: FuzzTargets): fc.Arbitrary<{ note: string; value: unknown }> {
  const ids = [...(targets.ownIds ?? []), ...(targets.foreignIds ?? [])];
  const options = [
    { arbitrary: plausibleValue(schema).map((value) => ({ note: "plausible", value })), weight: 4 },
    { arbitrary: wrongValue(schema).map((value) => ({ note: "wrong type", value })), weight: 3 },
    { arbitrary: oddString.map((value) => ({ note: "odd string", value })), weight: 3 },
    { arbitrary: longString.map((value) => ({ note: `long ${value.length}`, value })), weight: 1 },
  ];
  if (ids.length > 0) {
    options.push({ arbitrary: fc.constantFrom(...ids).map((value) => ({ note: "real id", value })), weight: 2 });
  }
  const freeForm = typesOf(schema).includes("object") && Object.keys(schema.properties ?? {}).length === 0;
  if (freeForm && targets.propNames?.length) {
    const values = fc.oneof(anyJson, oddString, longString, fc.jsonValue({ maxDepth: 4 }));
    options.push({
      arbitrary: fc
        .dictionary(fc.constantFrom(...targets.propNames), values, { minKeys: 1, maxKeys: 3 })
        .map((value) => ({ note: "props", value })),
      weight: 4,
    });
  }
  return fc.oneof(...options);
}

/** Property names that break naive object handling, and names the service reads specially. */
const EXTRA_FIELD_NAMES = [
  "__proto__",
  "constructor",
  "prototype",
  "hasOwnProperty",
  "toString",
  "valueOf",
  "include",
  "exclude",
  "id",
  "user_id",
  "owner_id",
  "",
  "\u0000",
  "\ud800",
  "a.b",
  "data",
];

const extraFieldName = fc.oneof(fc.constantFrom(...EXTRA_FIELD_NAMES), fc.string({ maxLength: 12 }));

// ---------------------------------------------------------------------------------------------
// Bodies

interface BodyChoice {
  note: string;
  body?: Buffer | (() => Buffer);
  chunked?: boolean;
  /** The content type that goes with it; `undefined` sends none. */
  contentType?: string;
}

/** A JSON object text with `inner` spliced in as the value of `field`. */
function jsonWith(field: string, inner: string): string {
  return `{${JSON.stringify(field)}:${inner}}`;
}

function deepJson(depth: number, kind: "array" | "object", key: string): string {
  if (kind === "array") return `${"[".repeat(depth)}${"]".repeat(depth)}`;
  return `${`{${JSON.stringify(key)}:`.repeat(depth)}1${"}".repeat(depth)}`;
}

/** A body derived from the operation's schema (or an empty object when it takes none), made bad. */
function schemaBody(operation: ApiOperation, targets: FuzzTargets): fc.Arbitrary<{ note: string; value: unknown }> {
  const schema = operation.body ?? { type: "object", properties: {} };
  const properties = Object.entries(schema.properties ?? {});
  // Each field is left out or given a value; built once, not per sample.
  const fields = fc
    .tuple(
      ...properties.map(([name, s]) =>
        fc.option(
          fieldValue(s, targets).map((v) => [name, v] as [string, { note: string; value: unknown }]),
          { freq: 3, nil: undefined },
        ),
      ),
    )
    .map((pairs) => pairs.filter((pair): pair is [string, { note: string; value: unknown }] => pair !== undefined));
  const extras = fc.array(fc.tuple(extraFieldName, anyJson), { maxLength: 3 });
  return fc.tuple(fields, extras).map(([pairs, extra]) => {
    // JSON.parse makes `__proto__` an own property; an object literal would set the prototype instead.
    const value: Record<string, unknown> = {};
    // Configurable: an extra field of the same name (a generated string can be any name) replaces it.
    for (const [name, v] of pairs)
      Object.defineProperty(value, name, { value: v.value, enumerable: true, configurable: true });
    for (const [name, v] of extra)
      Object.defineProperty(value, name, { value: v, enumerable: true, configurable: true });
    const notes = pairs.map(([name, v]) => `${name}:${v.note}`);
    const missing = properties.map(([name]) => name).filter((name) => !pairs.some(([n]) => n === name));
    if (missing.length) notes.push(`missing ${missing.join(",")}`);
    if (extra.length) notes.push(`extra ${extra.map(([n]) => JSON.stringify(n)).join(",")}`);
    return { note: notes.join(" "), value };
  });
}

const JSON_TYPES = ["application/json", "application/json; charset=utf-8", "application/vnd.api+json"];
const OTHER_TYPES = [
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/jsonx",
  "application/json-patch",
  "json",
  "application/json; charset=latin1",
  "APPLICATION/JSON",
  "application/json;;;",
  "*/*",
  "",
  "\u00e9",
];

const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: fc.constantFrom(...JSON_TYPES), weight: 8 },
  { arbitrary: fc.constantFrom(...OTHER_TYPES), weight: 2 },
  { arbitrary: fc.constant(undefined), weight: 1 },
);

/** Malformed JSON texts, some with bytes that are not UTF-8. */
const malformedJson: fc.Arbitrary<Buffer> = fc.oneof(
  fc
    .constantFrom(
      "{",
      "}",
      "{'a': 1}",
      '{"a": 1,}',
      '{"a": NaN}',
      '{"a": undefined}',
      "[1, 2",
      '{"a": "unterminated',
      '{"a": "\\ud800"}',
      '{"a": "\\u0000"}',
      '{"a": "\\x41"}',
      '{"a": 1} trailing',
      "\ufeff{}",
      "nul\u0000l",
      "1e999999",
      "-",
      '"\\',
      '{"a":1}{"b":2}',
      '{"__proto__": {"polluted": true}}',
      '{"constructor": {"prototype": {"polluted": true}}}',
      '{"name": 1, "name": "dup"}',
      "   ",
      "\u0000",
    )
    .map((text) => Buffer.from(text, "utf8")),
  fc.constantFrom(
    Buffer.from([0xff, 0xfe, 0x7b, 0x7d]),
    Buffer.from('{"name": "\xc3\x28"}', "latin1"),
    Buffer.from('{"name": "\xed\xa0\x80"}', "latin1"),
    Buffer.from('{"name": "\xc0\xaf"}', "latin1"),
    Buffer.from('{"name": "\xf8\x88\x80\x80\x80"}', "latin1"),
  ),
  fc.string({ unit: "binary", maxLength: 60 }).map((text) => Buffer.from(text, "utf8")),
);

function bodyChoice(operation: ApiOperation, targets: FuzzTargets): fc.Arbitrary<BodyChoice> {
  const limit = operation.bodyLimitBytes;
  const fromSchema = fc.tuple(schemaBody(operation, targets), contentType).map(([b, type]) => ({
    note: `json ${b.note}`,
    body: Buffer.from(JSON.stringify(b.value), "utf8"),
    contentType: type,
  }));
  const wrongTop = fc
    .tuple(
      fc.oneof(fc.constantFrom(null, true, 0, "", "x", [], [{}]), fc.array(anyJson, { maxLength: 3 })),
      contentType,
    )
    .map(([value, type]) => ({
      note: `top-level ${JSON.stringify(value)?.slice(0, 20)}`,
      body: Buffer.from(JSON.stringify(value) ?? "null", "utf8"),
      contentType: type,
    }));
  const fieldNames = Object.keys(operation.body?.properties ?? {});
  const field = fieldNames.length > 0 ? fc.constantFrom(...fieldNames, "extra") : fc.constant("extra");
  const deep = fc
    .tuple(
      field,
      fc.constantFrom(64, 101, 1_000, 10_000, 100_000),
      fc.constantFrom("array" as const, "object" as const),
      fc.constantFrom("a", ...(targets.propNames ?? [])),
    )
    .map(([name, depth, kind, key]) => ({
      note: `${kind} nested ${depth} deep in ${name}`,
      body: () => Buffer.from(jsonWith(name, deepJson(depth, kind, key)), "utf8"),
      contentType: "application/json",
    }));
  const huge = fc
    .tuple(field, fc.constantFrom(limit - 64, limit + 1, limit + 4096, 2 * limit), fc.boolean())
    .map(([name, size, chunked]) => {
      const padding = Math.max(0, size - name.length - 8);
      return {
        note: `${size} bytes${chunked ? " chunked" : ""} in ${name}`,
        body: () => Buffer.from(jsonWith(name, JSON.stringify("h".repeat(padding))), "utf8"),
        chunked,
        contentType: "application/json",
      };
    });
  const malformed = fc.tuple(malformedJson, contentType).map(([body, type]) => ({
    note: `malformed ${JSON.stringify(body.toString("latin1").slice(0, 24))}`,
    body,
    contentType: type,
  }));
  const none = fc.constant({ note: "no body" });
  return fc.oneof(
    { arbitrary: fromSchema, weight: operation.body ? 12 : 2 },
    { arbitrary: none, weight: operation.body ? 1 : 6 },
    { arbitrary: wrongTop, weight: 2 },
    { arbitrary: malformed, weight: 3 },
    { arbitrary: deep, weight: 1 },
    { arbitrary: huge, weight: 1 },
  );
}

// ---------------------------------------------------------------------------------------------
// Paths and query strings

const UNRESERVED = /[A-Za-z0-9\-._~]/;

/** Percent-encodes a string's UTF-8 bytes; a lone surrogate goes out as U+FFFD, as a browser would send it. */
function encodeComponent(text: string): string {
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    const char = String.fromCharCode(byte);
    out += byte < 0x80 && UNRESERVED.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** Segments sent as they are: broken escapes, encoded slashes and dots, raw Latin-1 bytes. */
const RAW_SEGMENTS = [
  "%",
  "%2",
  "%zz",
  "%E0%A4%A",
  "%C3%28",
  "%ED%A0%80",
  "%C0%AF",
  "%FF",
  "%00",
  "%2F",
  "a%2Fb",
  "%2e%2e",
  "%252F",
  "%20",
  "+",
  ";",
  ",",
  "\u00e9",
  "\u00ff\u00fe",
];

const FOREIGN = "foreign id";

interface SegmentChoice {
  note: string;
  raw: string;
}

/** A path parameter value: ids of the right kind (own, foreign, unknown), of other kinds, malformed, odd, long. */
function pathSegment(schema: JsonSchema, targets: FuzzTargets): fc.Arbitrary<SegmentChoice> {
  const prefix = prefixOf(schema);
  const matches = (id: string) => prefix === undefined || id.startsWith(prefix);
  const own = (targets.ownIds ?? []).filter(matches);
  const foreign = (targets.foreignIds ?? []).filter(matches);
  const options: fc.WeightedArbitrary<SegmentChoice>[] = [
    {
      arbitrary: wellFormedId(prefix ?? "dc_").map((id) => ({ note: "unknown id", raw: id })),
      weight: 3,
    },
    {
      arbitrary: fc
        .tuple(fc.constantFrom(...ALL_PREFIXES), idBody())
        .map(([p, body]) => ({ note: `${p} id`, raw: `${p}${body}` })),
      weight: 2,
    },
    {
      arbitrary: fc
        .tuple(fc.constantFrom(prefix ?? "", ""), fc.oneof(idBody(21), idBody(23), fc.string({ maxLength: 30 })))
        .map(([p, body]) => ({ note: "malformed id", raw: encodeComponent(`${p}${body}`) })),
      weight: 2,
    },
    { arbitrary: oddString.map((s) => ({ note: "odd", raw: encodeComponent(s || "x") })), weight: 3 },
    {
      arbitrary: fc.tuple(fc.constantFrom(prefix ?? ""), oddString).map(([p, s]) => ({
        note: "prefix+odd",
        raw: encodeComponent(`${p}${s}`),
      })),
      weight: 2,
    },
    { arbitrary: fc.constantFrom(...RAW_SEGMENTS).map((raw) => ({ note: "raw", raw })), weight: 2 },
    {
      arbitrary: fc
        .constantFrom(65, 129, 1000, 5000)
        .map((length) => ({ note: `long ${length}`, raw: `${prefix ?? ""}${"a".repeat(length)}` })),
      weight: 1,
    },
  ];
  if (own.length > 0) {
    options.push({ arbitrary: fc.constantFrom(...own).map((id) => ({ note: "own id", raw: id })), weight: 8 });
  }
  if (foreign.length > 0) {
    options.push({ arbitrary: fc.constantFrom(...foreign).map((id) => ({ note: FOREIGN, raw: id })), weight: 3 });
  }
  return fc.oneof(...options);
}

interface QueryPart {
  note: string;
  /** `name=value` pairs, already encoded (or deliberately broken). */
  pairs: string[];
}

/** A query parameter value by type: wrong types and out of range for numbers, odd strings, bad cursors. */
function queryValue(parameter: ApiParameter, targets: FuzzTargets): fc.Arbitrary<{ note: string; raw: string }> {
  const types = typesOf(parameter.schema);
  const numeric = types.includes("integer") || types.includes("number");
  const enc = (note: string) => (value: string) => ({ note, raw: encodeComponent(value) });
  const options: fc.WeightedArbitrary<{ note: string; raw: string }>[] = [
    { arbitrary: plausibleValue(parameter.schema).map((v) => enc("plausible")(String(v))), weight: 3 },
    { arbitrary: oddString.map(enc("odd")), weight: 3 },
    { arbitrary: longString.map((s) => enc(`long ${s.length}`)(s)), weight: 1 },
    { arbitrary: badCursor(targets).map(enc("cursor")), weight: 2 },
    { arbitrary: fc.constantFrom(...RAW_SEGMENTS).map((raw) => ({ note: "raw", raw })), weight: 1 },
  ];
  if (numeric) {
    const min = parameter.schema.minimum ?? 0;
    const max = parameter.schema.maximum ?? 1000;
    options.push({
      arbitrary: fc
        .constantFrom(
          String(min - 1),
          String(max + 1),
          "0",
          "-0",
          "1.5",
          "1e2",
          "0x10",
          " 5",
          "5 ",
          "NaN",
          "Infinity",
          "-Infinity",
          "abc",
          "",
          "9".repeat(400),
          "1,2",
          "[1]",
          "true",
        )
        .map(enc("bad number")),
      weight: 5,
    });
  }
  const ids = [...(targets.ownIds ?? []), ...(targets.foreignIds ?? [])];
  if (ids.length > 0) options.push({ arbitrary: fc.constantFrom(...ids).map(enc("real id")), weight: 2 });
  return fc.oneof(...options);
}

function queryString(operation: ApiOperation, targets: FuzzTargets): fc.Arbitrary<QueryPart> {
  const declared = fc
    .tuple(
      ...operation.queryParams.map((p) =>
        fc.option(
          fc.tuple(queryValue(p, targets), fc.option(queryValue(p, targets), { freq: 6 })).map(([v, again]) => ({
            note: `${p.name}:${v.note}${again ? "+repeated" : ""}`,
            pairs: [
              `${encodeComponent(p.name)}=${v.raw}`,
              ...(again ? [`${encodeComponent(p.name)}=${again.raw}`] : []),
            ],
          })),
          { freq: 2, nil: undefined },
        ),
      ),
    )
    .map((parts) => parts.filter((part): part is QueryPart => part !== undefined));
  const extra = fc.array(
    fc.tuple(extraFieldName, oddString).map(([name, value]) => ({
      note: `extra ${JSON.stringify(name)}`,
      pairs: [`${encodeComponent(name)}=${encodeComponent(value)}`],
    })),
    { maxLength: 2 },
  );
  const broken = fc.option(fc.constantFrom("&", "&&", "=", "a=b=c", "%", "%zz=1", "=x", "a", "a[]=1&a[b]=2"), {
    freq: 5,
  });
  return fc.tuple(declared, extra, broken).map(([d, e, b]) => {
    const parts = [...d, ...e];
    const pairs = parts.flatMap((p) => p.pairs);
    if (b) pairs.push(b);
    return { note: parts.map((p) => p.note).join(" ") + (b ? ` broken ${b}` : ""), pairs };
  });
}

// ---------------------------------------------------------------------------------------------
// Headers

interface AuthChoice {
  note: string;
  value?: string;
}

function authorization(targets: FuzzTargets): fc.Arbitrary<AuthChoice> {
  return fc.oneof(
    { arbitrary: fc.constant({ note: "key", value: `Bearer ${targets.apiKey}` }), weight: 12 },
    { arbitrary: fc.constant({ note: "no key" }), weight: 2 },
    {
      arbitrary: fc
        .constantFrom(
          "Bearer",
          "Bearer ",
          `bearer ${targets.apiKey}`,
          `Bearer  ${targets.apiKey}`,
          `Bearer ${targets.apiKey} `,
          `Bearer ${targets.apiKey}x`,
          `Bearer ${targets.apiKey.slice(0, -1)}`,
          `Basic ${Buffer.from("a:b").toString("base64")}`,
          "Bearer sluice_",
          "Bearer \u00e9\u00ff",
          `Bearer ${"k".repeat(8000)}`,
          `${targets.apiKey}`,
          "Bearer null",
        )
        .map((value) => ({ note: "bad key", value })),
      weight: 2,
    },
  );
}

// ---------------------------------------------------------------------------------------------
// Requests

const REQUEST_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"];

function withHeaders(auth: AuthChoice, body: BodyChoice, extra: Record<string, string> = {}): Record<string, string> {
  const headers: Record<string, string> = { ...extra };
  if (auth.value !== undefined) headers.authorization = auth.value;
  if (body.contentType !== undefined) headers["content-type"] = body.contentType;
  return headers;
}

/** Requests to one operation of the document. */
function operationRequest(operation: ApiOperation, targets: FuzzTargets): fc.Arbitrary<FuzzRequest> {
  const segments =
    operation.pathParams.length === 0
      ? fc.constant([] as [string, SegmentChoice][])
      : fc.tuple(
          ...operation.pathParams.map((p) =>
            pathSegment(p.schema, targets).map((s) => [p.name, s] as [string, SegmentChoice]),
          ),
        );
  const method = fc.oneof(
    { arbitrary: fc.constant(operation.method), weight: 12 },
    { arbitrary: fc.constantFrom(...REQUEST_METHODS.filter((m) => m !== operation.method)), weight: 1 },
  );
  const slash = fc.oneof({ arbitrary: fc.constant(""), weight: 9 }, { arbitrary: fc.constant("/"), weight: 1 });
  return fc
    .tuple(
      segments,
      queryString(operation, targets),
      bodyChoice(operation, targets),
      authorization(targets),
      method,
      slash,
    )
    .map(([params, query, body, auth, verb, trailing]) => {
      let path = operation.path;
      for (const [name, segment] of params) path = path.replace(`{${name}}`, segment.raw);
      const target = `${path}${trailing}${query.pairs.length ? `?${query.pairs.join("&")}` : ""}`;
      const notes = [
        operation.operationId,
        verb === operation.method ? "" : `method ${verb}`,
        ...params.map(([name, s]) => `${name}:${s.note}`),
        query.note && `query ${query.note}`,
        `body ${body.note}`,
        body.contentType === undefined ? "" : `ct ${JSON.stringify(body.contentType)}`,
        `auth ${auth.note}`,
      ];
      return {
        operation: operation.operationId,
        label: notes.filter(Boolean).join("; "),
        method: verb,
        target,
        headers: withHeaders(auth, body),
        body: body.body,
        chunked: body.chunked,
        expect: operation.page ? ("page" as const) : ("api" as const),
        foreign: params.some(([, s]) => s.note === FOREIGN),
      };
    });
}

/** The live streams (left out of {@link apiOperations}): a source's and a workflow's. */
const LIVE_STREAMS = [
  { operation: "live-stream", collection: "sources", id: { type: "string", pattern: "^dc_" } },
  { operation: "workflow-live-stream", collection: "workflows", id: { type: "string", pattern: "^p_" } },
] as const satisfies readonly { operation: string; collection: string; id: JsonSchema }[];

/** Requests to `/sources/{id}/sse` and `/workflows/{id}/sse`, the live streams. */
function streamRequest(targets: FuzzTargets): fc.Arbitrary<FuzzRequest> {
  return fc.oneof(...LIVE_STREAMS.map((stream) => oneStreamRequest(stream, targets)));
}

function oneStreamRequest(stream: (typeof LIVE_STREAMS)[number], targets: FuzzTargets): fc.Arbitrary<FuzzRequest> {
  const param = (name: string) =>
    fc.option(
      badCursor(targets).map((v) => `${name}=${encodeComponent(v)}`),
      { freq: 2 },
    );
  return fc
    .tuple(
      pathSegment(stream.id, targets),
      param("last_event_id"),
      fc.option(
        oddString.map((v) => `event_name=${encodeComponent(v)}`),
        { freq: 2 },
      ),
      fc.option(fc.constantFrom("0-0", "9999999999999-9", "abc", "\u00e9", "1-", "-1"), { freq: 2 }),
      authorization(targets),
      fc.oneof({ arbitrary: fc.constant("GET"), weight: 6 }, fc.constantFrom("POST", "PUT", "DELETE", "OPTIONS")),
    )
    .map(([segment, last, name, header, auth, method]) => {
      const query = [last, name].filter((q): q is string => q !== null);
      const headers: Record<string, string> = withHeaders(auth, { note: "" }, { accept: "text/event-stream" });
      if (header !== null) headers["last-event-id"] = header;
      return {
        operation: stream.operation,
        label: `${stream.operation}; id:${segment.note}; ${query.join("&")}; last-event-id ${header}; auth ${auth.note}; ${method}`,
        method,
        target: `/${stream.collection}/${segment.raw}/sse${query.length ? `?${query.join("&")}` : ""}`,
        headers,
        expect: "stream" as const,
        foreign: segment.note === FOREIGN,
      };
    });
}

/** Requests to `/http/{key}`, a source's HTTP interface. */
function endpointRequest(targets: FuzzTargets): fc.Arbitrary<FuzzRequest> {
  const keys = targets.endpointKeys ?? [];
  const key = fc.oneof(
    ...(keys.length > 0 ? [{ arbitrary: fc.constantFrom(...keys), weight: 4 }] : []),
    { arbitrary: fc.string({ unit: fc.constantFrom(..."abcXYZ019_-"), minLength: 1, maxLength: 64 }), weight: 2 },
    { arbitrary: fc.constantFrom("a".repeat(65), "%00", "..", "%2F", "\u00e9"), weight: 1 },
  );
  const anyOperation: ApiOperation = {
    operationId: "endpoint",
    method: "POST",
    path: "/http",
    auth: false,
    pathParams: [],
    queryParams: [],
    bodyLimitBytes: MAX_HTTP_INTERFACE_BODY_BYTES,
    page: false,
  };
  const subPath = fc.oneof(
    fc.constant(""),
    fc.constant("/"),
    fc.array(oddString.map(encodeComponent), { maxLength: 3 }).map((parts) => `/${parts.join("/")}`),
  );
  return fc
    .tuple(
      key,
      subPath,
      fc.constantFrom(...REQUEST_METHODS),
      bodyChoice(anyOperation, targets),
      queryString(
        { ...anyOperation, queryParams: [{ name: "q", required: false, schema: { type: "string" } }] },
        targets,
      ),
    )
    .map(([k, sub, method, body, query]) => ({
      operation: "endpoint",
      label: `endpoint ${keys.includes(k) ? "real" : "unknown"} key; ${method}; body ${body.note}`,
      method,
      target: `/http/${k}${sub}${query.pairs.length ? `?${query.pairs.join("&")}` : ""}`,
      headers: withHeaders({ note: "" }, body),
      body: method === "GET" || method === "HEAD" ? undefined : body.body,
      chunked: body.chunked,
      expect: "endpoint" as const,
    }));
}

/** Paths no route serves, near the real ones. */
function unroutedRequest(operations: ApiOperation[], targets: FuzzTargets): fc.Arbitrary<FuzzRequest> {
  const paths = operations.map((o) => o.path);
  const near = fc
    .tuple(
      fc.constantFrom(...paths),
      fc.constantFrom(
        (p: string) => `${p}/extra`,
        (p: string) => p.toUpperCase(),
        (p: string) => p.replace("/v1", "/v2"),
        (p: string) => p.replace("/v1", ""),
        (p: string) => p.replace(/\//g, "//"),
        (p: string) => `${p}//`,
        (p: string) => `${p}/..`,
        (p: string) => p.replace(/\{[a-z_]+\}/g, ""),
      ),
    )
    .map(([path, change]) => change(path).replace(/\{[a-z_]+\}/g, "x"));
  const random = fc
    .array(
      oddString.map((s) => encodeComponent(s)),
      { minLength: 1, maxLength: 4 },
    )
    .map((parts) => `/v1/${parts.join("/")}`);
  const odd = fc.constantFrom(
    "/",
    "//",
    "/v1",
    "/v1/",
    "/%",
    "/v1/%zz",
    "/\u00e9",
    "/v1/users/me%00",
    "/sources//sse",
    "/workflows//sse",
    "/http/",
  );
  return fc
    .tuple(fc.oneof(near, random, odd), authorization(targets), fc.constantFrom(...REQUEST_METHODS))
    .map(([target, auth, method]) => ({
      operation: "unrouted",
      label: `unrouted ${method} ${target.slice(0, 60)}`,
      method,
      target,
      headers: withHeaders(auth, { note: "" }),
      expect: "api" as const,
    }));
}

/** Every bad request the document allows to derive, weighted towards the documented operations. */
function fuzzRequests(document: OpenApiDocument, targets: FuzzTargets): fc.Arbitrary<FuzzRequest> {
  const operations = apiOperations(document);
  if (operations.length === 0) throw new Error("the OpenAPI document has no operations");
  return fc.oneof(
    ...operations.map((o) => ({ arbitrary: operationRequest(o, targets), weight: 1 })),
    // Against ~28 operations of weight 1: about 8% each.
    { arbitrary: unroutedRequest(operations, targets), weight: 2 },
    { arbitrary: streamRequest(targets), weight: 2 },
    { arbitrary: endpointRequest(targets), weight: 2 },
  );
}

// ---------------------------------------------------------------------------------------------
// Sending and judging

export type FuzzAnswer =
  | { status: number; headers: IncomingHttpHeaders; body: string }
  | { status: undefined; error: string };

/** Bodies are read up to this many characters; error answers are far smaller. */
const MAX_READ_CHARS = 16 * 1024 * 1024;

/**
 * Sends one request with node:http (fetch would normalise the path and refuse some bytes) and
 * reads the answer. A live stream's 200 is not read to its end: the connection is closed at once.
 */
function sendFuzzRequest(origin: string, request: FuzzRequest, agent: Agent, timeoutMs = 20_000): Promise<FuzzAnswer> {
  const url = new URL(origin);
  const body = typeof request.body === "function" ? request.body() : request.body;
  return new Promise((resolve) => {
    let settled = false;
    const done = (answer: FuzzAnswer) => {
      if (settled) return;
      settled = true;
      resolve(answer);
    };
    const headers: Record<string, string> = { ...request.headers };
    // Node frames a body without a length as chunked only for some methods unless told to.
    if (body) {
      if (request.chunked) headers["transfer-encoding"] = "chunked";
      else headers["content-length"] = String(body.length);
    }
    let outgoing: ReturnType<typeof httpRequest>;
    try {
      outgoing = httpRequest({
        host: url.hostname,
        port: url.port,
        method: request.method,
        path: request.target,
        headers,
        agent,
        timeout: timeoutMs,
      });
    } catch (error) {
      return done({ status: undefined, error: `could not send: ${(error as Error).message}` });
    }
    outgoing.on("response", (response) => {
      const status = response.statusCode ?? 0;
      if (status === 200 && String(response.headers["content-type"]).startsWith("text/event-stream")) {
        done({ status, headers: response.headers, body: "" });
        outgoing.destroy();
        return;
      }
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        if (body.length < MAX_READ_CHARS) body += chunk;
      });
      response.on("end", () => done({ status, headers: response.headers, body }));
      response.on("error", (error) => done({ status, headers: response.headers, body: `${body} [${error.message}]` }));
      response.on("aborted", () => done({ status, headers: response.headers, body }));
    });
    outgoing.on("timeout", () => {
      done({ status: undefined, error: `no answer in ${timeoutMs} ms` });
      outgoing.destroy();
    });
    outgoing.on("error", (error) => done({ status: undefined, error: error.message }));
    if (body) {
      if (request.chunked) {
        // Several writes, so the server sees a chunked body arrive in pieces.
        const step = 256 * 1024;
        for (let offset = 0; offset < body.length; offset += step) outgoing.write(body.subarray(offset, offset + step));
        outgoing.end();
      } else outgoing.end(body);
    } else outgoing.end();
  });
}

const ERROR_KEYS = new Set(["error", "details", "request_id"]);

/** What is wrong with the error body `text`, or undefined when it has the documented shape. */
function errorShapeProblem(text: string): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return "the body is not JSON";
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) return "the body is not a JSON object";
  const record = body as Record<string, unknown>;
  if (typeof record.error !== "string" || record.error === "") return "no error message";
  const unknown = Object.keys(record).filter((key) => !ERROR_KEYS.has(key));
  if (unknown.length > 0) return `unexpected keys ${unknown.join(", ")}`;
  if (record.request_id !== undefined && typeof record.request_id !== "string") return "request_id is not a string";
  if (record.details !== undefined) {
    const ok =
      Array.isArray(record.details) &&
      record.details.every(
        (d) =>
          d !== null &&
          typeof d === "object" &&
          typeof (d as Record<string, unknown>).field === "string" &&
          typeof (d as Record<string, unknown>).message === "string",
      );
    if (!ok) return "details is not a list of {field, message}";
  }
  return undefined;
}

export interface Verdict {
  kind: "server-error" | "no-answer" | "bad-shape" | "foreign-success";
  problem: string;
}

/** Judges one answer; undefined when it is acceptable. */
export function judgeAnswer(request: FuzzRequest, answer: FuzzAnswer): Verdict | undefined {
  if (answer.status === undefined) return { kind: "no-answer", problem: answer.error };
  if (answer.status >= 500) return { kind: "server-error", problem: `status ${answer.status}` };
  if (answer.status < 400) {
    if (request.foreign)
      return { kind: "foreign-success", problem: `status ${answer.status} for another account's id` };
    return undefined;
  }
  // HEAD answers carry no body to judge.
  const type = String(answer.headers["content-type"] ?? "");
  const problems: string[] = [];
  // A page route's own refusals are pages; what the pipeline refuses before it (a body too large,
  // headers too large) keeps the error shape.
  if (request.method !== "HEAD" && request.expect === "page" && /^text\/html\b/.test(type)) {
    if (!/<h1>[^<]+<\/h1>/.test(answer.body)) problems.push("no page that says what went wrong");
  } else if (request.method !== "HEAD") {
    if (!/^application\/json\b/.test(type)) problems.push(`content-type ${JSON.stringify(type)}`);
    const shape = errorShapeProblem(answer.body);
    if (shape) problems.push(shape);
  }
  if (request.expect !== "endpoint" && !answer.headers["x-request-id"]) problems.push("no x-request-id");
  return problems.length > 0 ? { kind: "bad-shape", problem: `${answer.status}: ${problems.join("; ")}` } : undefined;
}

export interface FuzzSummary {
  requests: number;
  serverErrors: number;
  badShape: number;
  noAnswer: number;
  /** Successes for another account's id. */
  foreignSuccess: number;
  /** How many answers had each status. */
  statuses: Record<number, number>;
  /** How many requests went to each operation (see {@link FuzzRequest.operation}). */
  operations: Record<string, number>;
  /** A few failures, each with the request and the answer, for the report. */
  examples: string[];
}

function describe(request: FuzzRequest, answer: FuzzAnswer, verdict: Verdict): string {
  const bytes = typeof request.body === "function" ? request.body() : request.body;
  const body = bytes ? bytes.subarray(0, 161).toString("utf8") : "";
  const shownBody = body.length > 160 ? `${body.slice(0, 160)}... (${bytes?.length} bytes)` : body;
  const answerText = answer.status === undefined ? answer.error : answer.body.slice(0, 300);
  return [
    `${verdict.kind}: ${verdict.problem}`,
    `  case: ${request.label}`,
    `  request: ${request.method} ${request.target.slice(0, 300)}${request.target.length > 300 ? "..." : ""}`,
    `  headers: ${JSON.stringify({ ...request.headers, authorization: request.headers.authorization?.slice(0, 40) })}`,
    ...(shownBody ? [`  body: ${JSON.stringify(shownBody)}`] : []),
    `  answer: ${answerText}`,
  ].join("\n");
}

/**
 * Sends `requests` to `origin` (the server's root, without `/v1`), `concurrency` at a time, and
 * counts what is wrong.
 */
export async function runFuzz(options: {
  origin: string;
  requests: readonly FuzzRequest[];
  concurrency?: number;
  maxExamples?: number;
  timeoutMs?: number;
}): Promise<FuzzSummary> {
  const { origin, requests, concurrency = 16, maxExamples = 10 } = options;
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const summary: FuzzSummary = {
    requests: 0,
    serverErrors: 0,
    badShape: 0,
    noAnswer: 0,
    foreignSuccess: 0,
    statuses: {},
    operations: {},
    examples: [],
  };
  try {
    await inBatches(requests, concurrency, async (request) => {
      const answer = await sendFuzzRequest(origin, request, agent, options.timeoutMs);
      summary.requests++;
      summary.operations[request.operation] = (summary.operations[request.operation] ?? 0) + 1;
      if (answer.status !== undefined) summary.statuses[answer.status] = (summary.statuses[answer.status] ?? 0) + 1;
      const verdict = judgeAnswer(request, answer);
      if (!verdict) return;
      if (verdict.kind === "server-error") summary.serverErrors++;
      else if (verdict.kind === "bad-shape") summary.badShape++;
      else if (verdict.kind === "no-answer") summary.noAnswer++;
      else summary.foreignSuccess++;
      if (summary.examples.length < maxExamples) summary.examples.push(describe(request, answer, verdict));
    });
  } finally {
    agent.destroy();
  }
  return summary;
}

/** `count` requests drawn from {@link fuzzRequests} with `seed`: the same seed gives the same requests. */
export function sampleRequests(
  document: OpenApiDocument,
  targets: FuzzTargets,
  count: number,
  seed: number,
): FuzzRequest[] {
  return fc.sample(fuzzRequests(document, targets), { seed, numRuns: count });
}

// ---------------------------------------------------------------------------------------------
// Preparing targets on a running server

/** A source with an HTTP interface that emits what it receives, without a custom response. */
const FUZZ_SOURCE_CODE = `
module.exports = {
  name: "Fuzz target",
  version: "0.0.1",
  props: {
    http: "$.interface.http",
    obj: { type: "object", optional: true },
    label: { type: "string", optional: true },
    count: { type: "integer", optional: true, min: 0, max: 10 },
  },
  async run(event) {
    this.$emit({ method: event.method, size: (event.bodyRaw || "").length }, { summary: "fuzz" });
  },
};
`;

/** One call that must succeed; its JSON answer. */
async function call(api: ReturnType<typeof apiClient>, method: string, path: string, body?: unknown) {
  const answer = await api(method, path, body);
  if (answer.status >= 300)
    throw new Error(`${method} ${path} answered ${answer.status}: ${JSON.stringify(answer.json)}`);
  return answer.json as { data: any; page_info?: { start_cursor: string | null; end_cursor: string | null } };
}

/** What {@link prepareTargets} made: ids, an endpoint key and a cursor. */
export interface PreparedTargets {
  ids: string[];
  /** The props of {@link FUZZ_SOURCE_CODE}. */
  propNames: string[];
  endpointKeys: string[];
  cursors: string[];
}

/**
 * Makes one of the things the routes take ids of, as the key's user (a source with an HTTP
 * interface that has emitted an event, a webhook, workflows that have run), so that bad input
 * also reaches real resources.
 * `baseUrl` ends in `/v1`.
 */
export async function prepareTargets(baseUrl: string, apiKey: string): Promise<PreparedTargets> {
  const api = apiClient(baseUrl, apiKey);
  const me = (await call(api, "GET", "/users/me")).data;
  const ids: string[] = [me.id, ...me.orgs.map((o: { id: string }) => o.id)];
  const source = (await call(api, "POST", "/sources", { component_code: FUZZ_SOURCE_CODE, name: "fuzz" })).data;
  ids.push(source.id, source.component_id);
  const endpointUrl: string = source.configured_props.http.endpoint_url;
  const endpointKey = new URL(endpointUrl).pathname.split("/")[2] as string;
  const webhook = (await call(api, "POST", `/webhooks?url=${encodeURIComponent("https://example.com/hook")}`)).data;
  ids.push(webhook.id);
  await fetch(endpointUrl, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  const events = await eventually(
    async () => {
      const page = await call(api, "GET", `/sources/${source.id}/event_summaries`);
      return page.data.length > 0 ? page : undefined;
    },
    "the fuzz source's first event",
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  ids.push(...events.data.map((e: { id: string }) => e.id));
  const cursors: string[] = [];
  if (events.page_info?.end_cursor) cursors.push(events.page_info.end_cursor);
  const sources = await call(api, "GET", "/users/me/sources");
  if (sources.page_info?.start_cursor) cursors.push(sources.page_info.start_cursor);
  const workflows = await prepareWorkflows(api);
  ids.push(...workflows.ids);
  cursors.push(...workflows.cursors);
  return {
    ids,
    endpointKeys: [endpointKey, ...workflows.endpointKeys],
    cursors,
    propNames: ["http", "obj", "label", "count"],
  };
}

/** A step of the fuzz workflows: it answers when it can, and emits, so every list has an entry. */
const FUZZ_STEP_CODE = `export default defineComponent({
  async run({ steps, $ }) {
    await $.respond({ status: 200, body: { size: (steps.trigger.event.bodyRaw || "").length } });
    $.send.emit({ raw_event: { method: steps.trigger.event.method } });
    $.send.sse({ channel: "fuzz", payload: 1 });
  },
});`;

/**
 * A workflow of the key's user whose HTTP trigger returns a custom response (so fuzzed requests to
 * it reach a run inline), run once: its ids, its trigger's endpoint key, and cursors of its lists.
 */
async function prepareWorkflows(api: ReturnType<typeof apiClient>) {
  const workflow = (
    await call(api, "POST", "/workflows", {
      settings: { name: "fuzz", auto_deploy: true },
      steps: [{ namespace: "fuzz", component_code: FUZZ_STEP_CODE }],
      triggers: [{ type: "http", props: { custom_response: true } }],
    })
  ).data;
  const endpointUrl: string = workflow.triggers[0].endpoint_url;
  await fetch(endpointUrl, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  const events = await eventually(
    async () => {
      const page = await call(api, "GET", `/workflows/${workflow.id}/event_summaries`);
      return page.data.length > 0 ? page : undefined;
    },
    "the fuzz workflow's first event",
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  const runs = await call(api, "GET", `/workflows/${workflow.id}/runs`);
  const listed = await call(api, "GET", "/users/me/workflows?limit=1");
  const ids: string[] = [
    workflow.id,
    workflow.steps[0].id,
    workflow.triggers[0].id,
    ...events.data.map((e: { id: string }) => e.id),
    ...runs.data.map((r: { id: string }) => r.id),
  ];
  const cursors = [events.page_info?.end_cursor, runs.page_info?.end_cursor, listed.page_info?.end_cursor].filter(
    (cursor): cursor is string => typeof cursor === "string",
  );
  return { ids, endpointKeys: [new URL(endpointUrl).pathname.split("/")[2] as string], cursors };
}
