import type { Io } from "./command.ts";

/**
 * Control characters (but new line and tab), written escaped (`\x1b`) when text from a server is
 * printed: a log line, an event's channel or a source's name comes from component code and from
 * what it received, and raw escape sequences could move the cursor, rewrite earlier lines or set
 * the terminal's title. JSON output escapes them itself.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** `text` safe to print on a terminal (see {@link CONTROL}). */
export const printable = (text: string) =>
  text.replace(CONTROL, (char) => `\\x${char.charCodeAt(0).toString(16).padStart(2, "0")}`);

/** Writes text for people on stdout, with control characters escaped. */
export const printText = (io: Io, text: string) => io.out.write(printable(text));

/** Writes `value` as one line of JSON (a list or a record for `--json`; one line per event when following). */
export const printJson = (io: Io, value: unknown) => io.out.write(`${JSON.stringify(value)}\n`);

/** Rows as aligned columns under a header; "(none)" for no rows. */
export function printTable(io: Io, headers: readonly string[], rows: readonly (readonly string[])[]): void {
  if (rows.length === 0) {
    io.out.write("(none)\n");
    return;
  }
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  printText(io, `${[line(headers), ...rows.map(line)].join("\n")}\n`);
}

/** Epoch seconds or milliseconds as an ISO time without its milliseconds. */
export function isoTime(epoch: number): string {
  const ms = epoch < 1e11 ? epoch * 1000 : epoch;
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/** Without a terminal, how often a long step says it is still running. */
const STILL_RUNNING_EVERY_MS = 5_000;

/**
 * Runs `task` while saying, on stderr, that `label` is under way and for how long: a spinner on a
 * terminal, else a line at the start and one every few seconds (a deploy that installs npm
 * packages takes seconds, and silence looks like a hang).
 */
export async function withProgress<T>(io: Io, label: string, task: Promise<T>): Promise<T> {
  const started = Date.now();
  const seconds = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  let timer: NodeJS.Timeout;
  if (io.err.isTTY) {
    let frame = 0;
    const draw = () => io.err.write(`\r\x1b[2K${SPINNER[frame++ % SPINNER.length]} ${label}… ${seconds()}`);
    draw();
    timer = setInterval(draw, 100);
  } else {
    io.err.write(`${label}…\n`);
    timer = setInterval(() => io.err.write(`${label}: still running (${seconds()})\n`), STILL_RUNNING_EVERY_MS);
  }
  try {
    return await task;
  } finally {
    clearInterval(timer);
    if (io.err.isTTY) io.err.write("\r\x1b[2K");
  }
}
