import type { ParseArgsConfig } from "node:util";

/** What a command reads and writes: the process's streams and environment, or a test's. */
export interface Io {
  out: NodeJS.WritableStream & { isTTY?: boolean };
  err: NodeJS.WritableStream & { isTTY?: boolean };
  stdin: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (raw: boolean) => unknown };
  env: Record<string, string | undefined>;
  /** The user's home directory (where the profile file lives unless XDG_CONFIG_HOME says otherwise). */
  home: string;
  /** Aborted on Ctrl-C (SIGINT) or SIGTERM: a command that follows a stream ends then. */
  signal: AbortSignal;
}

export type Options = NonNullable<ParseArgsConfig["options"]>;

/** Values of parsed options: strings, booleans, and lists of strings for options given `multiple`. */
export type Values = Record<string, string | boolean | string[] | undefined>;

/** One `sluice <name>` command. */
export interface Command {
  name: string;
  /** One line for `sluice --help`. */
  summary: string;
  /** The whole of `sluice <name> --help`. */
  usage: string;
  options: Options;
  /** How many positional arguments it takes, at least and at most. */
  positionals: { min: number; max: number };
  /** It handles SIGINT and SIGTERM itself (`start`), rather than through `io.signal`. */
  ownSignals?: boolean;
  run(values: Values, positionals: string[], io: Io): Promise<void>;
}
