import { readFileSync } from "node:fs";
import { parseCommandArgs } from "./args.ts";
import type { Command, Io } from "./command.ts";
import { accounts } from "./commands/accounts.ts";
import { remove } from "./commands/delete.ts";
import { deploy, update } from "./commands/deploy.ts";
import { dev } from "./commands/dev.ts";
import { events, logs } from "./commands/events.ts";
import { list } from "./commands/list.ts";
import { createKey, createUser, start } from "./commands/local.ts";
import { login } from "./commands/login.ts";
import { records } from "./commands/records.ts";
import { registry } from "./commands/registry.ts";
import { CliError } from "./errors.ts";
import { printable } from "./output.ts";

/** Every command, in the order `sluice --help` lists them. */
export const COMMANDS: readonly Command[] = [
  login,
  deploy,
  update,
  dev,
  list,
  records,
  accounts,
  events,
  logs,
  remove,
  registry,
  start,
  createKey,
  createUser,
];

export const VERSION = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
).version;

export const USAGE = `Usage: sluice <command> [options]

Commands:
${COMMANDS.map((command) => `  ${command.name.padEnd(12)} ${command.summary}`).join("\n")}

Run \`sluice <command> --help\` for a command's options; \`sluice --version\` for the version.
Commands that call a Sluice use the profile \`sluice login\` saved, or SLUICE_URL and SLUICE_API_KEY.
Reference: docs/cli.md`;

/**
 * Runs the command line `argv` (without node and the script); resolves with the exit code. An
 * error becomes one line on stderr, never a stack: an API error's message, a usage error with
 * the command's help.
 */
export async function main(argv: readonly string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    const topic = name === "help" ? COMMANDS.find((command) => command.name === rest[0]) : undefined;
    io.out.write(`${topic?.usage ?? USAGE}\n`);
    return 0;
  }
  if (name === "--version" || name === "-v") {
    io.out.write(`sluice ${VERSION}\n`);
    return 0;
  }
  const command = COMMANDS.find((candidate) => candidate.name === name);
  if (command === undefined) {
    io.err.write(`sluice: unknown command ${JSON.stringify(name)}\n\n${USAGE}\n`);
    return 2;
  }
  try {
    const parsed = parseCommandArgs(command, rest);
    if (parsed.help) {
      io.out.write(`${command.usage}\n`);
      return 0;
    }
    await command.run(parsed.values, parsed.positionals, io);
    return 0;
  } catch (error) {
    if (error instanceof CliError) {
      // An API error's message is the server's text: printed as any server text is.
      io.err.write(`sluice: ${printable(error.message)}\n`);
      return error.exitCode;
    }
    throw error;
  }
}

/** Whether `command` (by name) handles its own signals; see {@link Command.ownSignals}. */
export const ownsSignals = (name: string | undefined) =>
  COMMANDS.find((command) => command.name === name)?.ownSignals === true;
