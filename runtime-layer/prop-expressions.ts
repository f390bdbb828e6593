/**
 * A workflow step's `{{ ... }}` expressions (docs/workflows.md "Expressions in props"): a prop
 * value, or a string inside one, that holds `{{ <JavaScript> }}` is evaluated as the step starts,
 * with the run's `steps` in scope, as the original's builder does (`{{steps.trigger.event.body.id}}`).
 * A string that is one expression and nothing else gives the expression's value itself (an
 * object stays an object); an expression inside other text is written into it (`JSON.stringify`
 * for objects and arrays, `String` otherwise). The expressions run in the sandbox, in the step's
 * own scope and time limit: they are the workflow's code, as trusted as its steps.
 */
import { PROP_EXPRESSION, PROP_TYPES_WITHOUT_EXPRESSIONS } from "./protocol.ts";

type Compiled = (steps: unknown) => unknown;

/** A string that is one expression and nothing else (no `}}` inside it). */
const WHOLE = /^\s*\{\{((?:(?!\}\})[\s\S])+)\}\}\s*$/;
const EVERY = new RegExp(PROP_EXPRESSION.source, "g");
/** Compiled expressions by text, shared by the runs of this process (a workflow's are few). */
const compiled = new Map<string, Compiled>();
const COMPILED_MAX = 1000;

/** The error a step fails with when one of its props' expressions does not compile or throws. */
export class PropExpressionError extends Error {
  override readonly name = "PropExpressionError";
}

/** `props` with every expression evaluated; props of structured types are left as they are. */
export function evaluatePropExpressions(
  props: Record<string, unknown>,
  propTypes: Record<string, string>,
  steps: unknown,
): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const [name, value] of Object.entries(props)) {
    const type = propTypes[name];
    if (type !== undefined && PROP_TYPES_WITHOUT_EXPRESSIONS.has(type)) continue;
    if (!holdsExpression(value)) continue;
    out ??= { ...props };
    Object.defineProperty(out, name, {
      value: evaluateValue(value, steps, name),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out ?? props;
}

function holdsExpression(value: unknown): boolean {
  if (typeof value === "string") return PROP_EXPRESSION.test(value);
  if (Array.isArray(value)) return value.some(holdsExpression);
  if (value !== null && typeof value === "object") return Object.values(value).some(holdsExpression);
  return false;
}

function evaluateValue(value: unknown, steps: unknown, prop: string): unknown {
  if (typeof value === "string") return evaluateString(value, steps, prop);
  if (Array.isArray(value)) return value.map((item) => evaluateValue(item, steps, prop));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      Object.defineProperty(out, key, {
        value: evaluateValue(item, steps, prop),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}

function evaluateString(text: string, steps: unknown, prop: string): unknown {
  const whole = WHOLE.exec(text);
  if (whole) return evaluate(whole[1] as string, steps, prop);
  return text.replace(EVERY, (_match, expression: string) => written(evaluate(expression, steps, prop)));
}

function written(value: unknown): string {
  if (value !== null && typeof value === "object") return JSON.stringify(value) ?? String(value);
  return String(value);
}

function evaluate(expression: string, steps: unknown, prop: string): unknown {
  const text = expression.trim();
  let fn = compiled.get(text);
  if (!fn) {
    try {
      fn = new Function("steps", `"use strict"; return (${text}\n);`) as Compiled;
    } catch (error) {
      throw new PropExpressionError(
        `the prop "${prop}": {{${text}}} is not a JavaScript expression: ${messageOf(error)}`,
      );
    }
    if (compiled.size >= COMPILED_MAX) compiled.clear();
    compiled.set(text, fn);
  }
  try {
    return fn(steps);
  } catch (error) {
    throw new PropExpressionError(`the prop "${prop}": {{${text}}} failed: ${messageOf(error)}`);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
