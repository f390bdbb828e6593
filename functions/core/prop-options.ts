/**
 * What the configure and props endpoints make of a probe's answer (docs/components.md "Dynamic
 * props"). The answer comes from component code in the sandbox, so it is hostile input: any JSON
 * at all, as large as the channel lets through. Here it is checked for the shapes the original
 * documents and cut to bounds a client can use; anything else is a clear message for the
 * response's `errors`, never a 500.
 */
import type { ErrorRecord, LogRecord } from "#runtime/protocol";
import { clipText } from "./clip-text.ts";
import type { Json } from "./component-model.ts";
import { redactPaths } from "./redact-paths.ts";

/** Options of one page at most: a longer list is a component bug or an attack, not a page. */
export const MAX_OPTIONS_PER_PAGE = 10_000;
/** Characters of one option's label (and of one string option) at most. */
export const MAX_OPTION_LABEL_CHARS = 1024;
/** UTF-8 bytes of one page's options as JSON at most. */
export const MAX_OPTIONS_BYTES = 4 * 1024 * 1024;
/** UTF-8 bytes of `context` as JSON at most: the client sends it back as `prev_context`. */
export const MAX_CONTEXT_BYTES = 64 * 1024;
/** Observations (console lines and the error) one answer carries at most. */
export const MAX_OBSERVATIONS = 100;
/** Characters of one observation's message at most. */
const MAX_OBSERVATION_CHARS = 4096;
/** Props `additionalProps` may return at most. */
export const MAX_DYNAMIC_PROPS = 500;

/** A labelled option, as the original's `options` items are. */
export interface PropOption {
  label: string;
  value: Json;
}

/**
 * One page of a prop's options in the original's response shape: plain strings travel in
 * `stringOptions` (with `options` null), anything else as `{label, value}` in `options` (with
 * `stringOptions` null), as the original's configure API answers and its React SDK reads.
 */
export interface OptionsPage {
  options: PropOption[] | null;
  stringOptions: string[] | null;
  /** What `options` returned beside its list (`{options, context}`), for the next page's `prev_context`. */
  context: Record<string, Json> | null;
}

/** An answer of `options` that is not of a documented shape, or over a bound. */
export class OptionsResultError extends Error {
  override readonly name = "OptionsResultError";
}

const isObject = (value: unknown): value is Record<string, Json> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const jsonBytes = (value: Json) => Buffer.byteLength(JSON.stringify(value));

/**
 * Reads what a prop's `options` returned: an array of strings or `{label, value}` objects (numbers
 * and booleans count as their own label), or `{options: [...], context}` when it pages with a
 * context (component-model.md "Async options").
 * @throws OptionsResultError naming what is wrong, for `errors`.
 */
export function optionsPage(returned: Json | undefined): OptionsPage {
  let list: Json;
  let context: Record<string, Json> | null = null;
  if (Array.isArray(returned)) list = returned;
  else if (isObject(returned) && Array.isArray(returned.options)) {
    list = returned.options;
    const given = returned.context;
    if (isObject(given)) context = given;
    else if (given !== undefined && given !== null) {
      throw new OptionsResultError("options() returned a context that is not an object");
    }
  } else {
    throw new OptionsResultError(
      `options() must return an array of options or {options, context}, not ${kindOf(returned)}`,
    );
  }
  if (list.length > MAX_OPTIONS_PER_PAGE) {
    throw new OptionsResultError(
      `options() returned ${list.length} options; one page may hold at most ${MAX_OPTIONS_PER_PAGE}`,
    );
  }
  const items = list.map((item, index) => optionItem(item, index));
  if (jsonBytes(items as Json) > MAX_OPTIONS_BYTES) {
    throw new OptionsResultError(`options() returned more than ${MAX_OPTIONS_BYTES} bytes of options`);
  }
  if (context && jsonBytes(context) > MAX_CONTEXT_BYTES) {
    throw new OptionsResultError(`options() returned a context over ${MAX_CONTEXT_BYTES} bytes as JSON`);
  }
  if (items.every((item): item is string => typeof item === "string")) {
    return { options: null, stringOptions: items, context };
  }
  const options = items.map((item) => (typeof item === "string" ? { label: item, value: item } : item));
  return { options, stringOptions: null, context };
}

function optionItem(item: Json, index: number): string | PropOption {
  const where = `options()[${index}]`;
  if (typeof item === "string") return label(item, where);
  if (typeof item === "number" || typeof item === "boolean") return { label: String(item), value: item };
  if (isObject(item) && Object.hasOwn(item, "value") && item.value !== null) {
    const given = item.label;
    if (given !== undefined && typeof given !== "string")
      throw new OptionsResultError(`${where}.label must be a string`);
    const value = item.value as Json;
    return { label: label(given ?? (typeof value === "string" ? value : JSON.stringify(value)), where), value };
  }
  throw new OptionsResultError(`${where} must be a string or {label, value}, not ${kindOf(item)}`);
}

function label(text: string, where: string): string {
  if (text.length > MAX_OPTION_LABEL_CHARS) {
    throw new OptionsResultError(`${where} has a label over ${MAX_OPTION_LABEL_CHARS} characters`);
  }
  return text;
}

function kindOf(value: Json | undefined): string {
  if (value === undefined || value === null) return "nothing";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object without an options array" : `a ${typeof value}`;
}

/** A log line or the error of a probe, in the original's observation shape (SDK `Observation`). */
export type Observation =
  | { k: string; msg: string; ts: number }
  | { k: "error"; err: { name: string; message: string }; ts: number };

/** The observations of a probe: its console lines (`console.log`, ...), then its error. */
export function observationsOf(logs: readonly LogRecord[], error?: ErrorRecord): Observation[] {
  const out: Observation[] = logs.slice(0, MAX_OBSERVATIONS).map((log) => ({
    k: `console.${log.level}`,
    msg: clipText(redactPaths(log.message), MAX_OBSERVATION_CHARS),
    ts: log.ts,
  }));
  if (error) out.push({ k: "error", err: errorText(error), ts: error.ts });
  return out;
}

/**
 * An entry of `errors`: the JSON text of `{name, message}`, which the original's React SDK parses
 * (and shows as it is when it is no JSON).
 */
export function errorEntry(error: { name: string; message: string }): string {
  return JSON.stringify(errorText(error));
}

function errorText(error: { name: string; message: string }): { name: string; message: string } {
  return {
    name: clipText(error.name, 200),
    message: clipText(redactPaths(error.message), MAX_OBSERVATION_CHARS),
  };
}
