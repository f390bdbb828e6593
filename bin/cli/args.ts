import { parseArgs } from "node:util";
import type { Command, Values } from "./command.ts";
import { UsageError } from "./errors.ts";

/** What a command line asks of a command: its help, or a run with these values and positionals. */
export type Parsed = { help: true } | { help: false; values: Values; positionals: string[] };

const HELP_FLAGS = new Set(["--help", "-h"]);

/**
 * Parses `args` against `command`'s options, strictly: an unknown option, a missing value or a
 * wrong number of positionals is a {@link UsageError} naming it. `--help` (or `-h`) anywhere
 * before a `--` asks for help, whatever else is there, so that asking never does anything.
 */
export function parseCommandArgs(command: Command, args: readonly string[]): Parsed {
  const end = args.indexOf("--");
  if ((end < 0 ? args : args.slice(0, end)).some((arg) => HELP_FLAGS.has(arg))) return { help: true };
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...args], options: command.options, allowPositionals: true, strict: true }) as {
      values: Values;
      positionals: string[];
    };
  } catch (error) {
    throw new UsageError(`${command.name}: ${(error as Error).message}\n\n${command.usage}`);
  }
  const { min, max } = command.positionals;
  const count = parsed.positionals.length;
  if (count < min) throw new UsageError(`${command.name}: missing arguments\n\n${command.usage}`);
  if (count > max) {
    const extra = parsed.positionals.slice(max).join(" ");
    throw new UsageError(`${command.name}: unexpected argument ${JSON.stringify(extra)}\n\n${command.usage}`);
  }
  return { help: false, ...parsed };
}

/** The options every command that talks to a Sluice takes. */
export const CLIENT_OPTIONS = {
  json: { type: "boolean" },
  profile: { type: "string" },
} as const;

export const CLIENT_OPTIONS_HELP = `  --json              print JSON for scripts instead of text
  --profile <name>    the saved profile to use (default: "default"); see \`sluice login\``;

/**
 * `--prop name=value` assignments as a record of raw strings. A name is given once; the value is
 * everything after the first `=` (it may hold `=` itself).
 */
export function propAssignments(assignments: readonly string[]): Record<string, string> {
  const props: Record<string, string> = {};
  for (const assignment of assignments) {
    const at = assignment.indexOf("=");
    const name = at > 0 ? assignment.slice(0, at) : "";
    if (!/^[A-Za-z_$][\w$]*$/.test(name))
      throw new UsageError(`--prop ${JSON.stringify(assignment)}: expected name=value, such as --prop greeting=Hi`);
    if (Object.hasOwn(props, name)) throw new UsageError(`--prop ${name} is given twice`);
    props[name] = assignment.slice(at + 1);
  }
  return props;
}

/** Prop types whose values are taken as written; any other type's value is read as JSON when it parses. */
const TEXT_TYPES = new Set(["string"]);

/**
 * Turns raw `--prop` strings into configured props, by the type each prop declares: a `string`
 * prop takes the text as written (`--prop id=007` stays "007"), any other the JSON it spells
 * (`--prop count=3`, `--prop enabled=true`, `--prop 'timer={"intervalSeconds":60}'`), or the
 * text when it is not JSON (a prop the component does not declare: the server says so).
 */
export function coerceProps(
  raw: Record<string, string>,
  declared: readonly { name: string; type: string }[],
): Record<string, unknown> {
  const types = new Map(declared.map((prop) => [prop.name, prop.type]));
  const props: Record<string, unknown> = {};
  for (const [name, text] of Object.entries(raw)) {
    const type = types.get(name);
    if (type !== undefined && TEXT_TYPES.has(type)) props[name] = text;
    else {
      try {
        props[name] = JSON.parse(text);
      } catch {
        props[name] = text;
      }
    }
  }
  return props;
}
