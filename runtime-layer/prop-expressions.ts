/**
 * A workflow step's `{{ ... }}` expressions (docs/workflows.md "Expressions in props"): the props
 * trusted code names (`WorkflowStepInvocation.expressions`: never a secret, a static or a
 * structured prop) are evaluated as the step starts, their expressions with the run's `steps` in
 * scope, as the original's builder does (`{{steps.trigger.event.body.id}}`). A string that is one
 * expression and nothing else gives the expression's value itself (an object stays an object; a
 * promise is awaited); an expression inside other text is written into it (`JSON.stringify` for
 * objects and arrays, `String` otherwise). Strings inside objects and arrays are evaluated too.
 * The expressions run in the sandbox, in the step's own scope and time limit: they are the
 * workflow's code, as trusted as its steps. Texts are scanned in linear time
 * (`findPropExpression`).
 */
import { findPropExpression, type PropExpressionSpan, wholePropExpression } from "./protocol.ts";

type Compiled = (steps: unknown, process: unknown) => unknown;

/**
 * What `process` is in an expression: the original's `{{process.env.NAME}}` reads a workspace's
 * environment variables, which Sluice does not have; reading one fails the step saying so, rather
 * than giving `undefined` (an empty secret that a check such as validate-webhook-auth's compares
 * an empty header with).
 */
const EXPRESSION_PROCESS = Object.freeze({
  env: new Proxy(
    {},
    {
      get: (_target, name) => {
        if (typeof name === "symbol") return undefined;
        throw new Error(`process.env.${name} is not set: Sluice has no environment variables for workflows`);
      },
      has: () => false,
      ownKeys: () => [],
    },
  ),
});

/** Compiled expressions by text, shared by the runs of this process (a workflow's are few). */
const compiled = new Map<string, Compiled>();
const COMPILED_MAX = 1000;

/** The error a step fails with when one of its props' expressions does not compile, throws or rejects. */
export class PropExpressionError extends Error {
  override readonly name = "PropExpressionError";
}

/** `props` with the expressions of the props `names` evaluated; the same object when there are none. */
export async function evaluatePropExpressions(
  props: Record<string, unknown>,
  names: readonly string[] | undefined,
  steps: unknown,
): Promise<Record<string, unknown>> {
  if (names === undefined || names.length === 0) return props;
  const out = copy(props);
  for (const name of names) {
    if (Object.hasOwn(props, name)) define(out, name, await evaluateValue(props[name], steps, name));
  }
  return out;
}

function copy(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) define(out, key, item);
  return out;
}

/** defineProperty: a key named `__proto__` is data, which an assignment would drop. */
function define(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

async function evaluateValue(value: unknown, steps: unknown, prop: string): Promise<unknown> {
  if (typeof value === "string") return evaluateString(value, steps, prop);
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (const item of value) out.push(await evaluateValue(item, steps, prop));
    return out;
  }
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) define(out, key, await evaluateValue(item, steps, prop));
    return out;
  }
  return value;
}

async function evaluateString(text: string, steps: unknown, prop: string): Promise<unknown> {
  const first = findPropExpression(text);
  if (first === undefined) return text;
  const expression = (span: PropExpressionSpan) => text.slice(span.start + 2, span.end - 2);
  // One expression and nothing else around it but spaces: its value itself.
  const whole = wholePropExpression(text);
  if (whole) return evaluate(expression(whole), steps, prop);
  let written = "";
  let from = 0;
  for (let span: typeof first | undefined = first; span; span = findPropExpression(text, span.end)) {
    const source = expression(span);
    written += text.slice(from, span.start) + asText(await evaluate(source, steps, prop), source, prop);
    from = span.end;
  }
  return written + text.slice(from);
}

function asText(value: unknown, source: string, prop: string): string {
  try {
    if (value !== null && typeof value === "object") return JSON.stringify(value) ?? String(value);
    return String(value);
  } catch (error) {
    throw new PropExpressionError(
      `the prop "${prop}": {{${source.trim()}}} gave a value that cannot be written as text: ${messageOf(error)}`,
    );
  }
}

async function evaluate(source: string, steps: unknown, prop: string): Promise<unknown> {
  const text = source.trim();
  let fn = compiled.get(text);
  if (!fn) {
    try {
      fn = new Function("steps", "process", `"use strict"; return (${text}\n);`) as Compiled;
    } catch (error) {
      throw new PropExpressionError(
        `the prop "${prop}": {{${text}}} is not a JavaScript expression: ${messageOf(error)}`,
      );
    }
    if (compiled.size >= COMPILED_MAX) compiled.clear();
    compiled.set(text, fn);
  }
  try {
    return await fn(steps, EXPRESSION_PROCESS);
  } catch (error) {
    throw new PropExpressionError(`the prop "${prop}": {{${text}}} failed: ${messageOf(error)}`);
  }
}

/** What was thrown, as text: anything may be thrown, even a value that cannot become a string. */
function messageOf(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return "a value that cannot be shown";
  }
}
