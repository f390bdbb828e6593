#!/usr/bin/env -S npx tsx
import { homedir } from "node:os";
import { main, ownsSignals } from "./cli/main.ts";

/* The `sluice` command line: bin/cli/ holds its commands (docs/cli.md). */

const controller = new AbortController();
const argv = process.argv.slice(2);
if (!ownsSignals(argv[0])) {
  // The first Ctrl-C ends a command that follows a stream or watches files, cleanly; a second one
  // (a command that does not end) exits at once.
  const stop = () => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort();
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}

main(argv, {
  out: process.stdout,
  err: process.stderr,
  stdin: process.stdin,
  env: process.env,
  home: homedir(),
  signal: controller.signal,
}).then(
  (code) => {
    process.exitCode = code;
    // Nothing left to wait for: a finished command does not linger on an idle keep-alive socket.
    if (!ownsSignals(argv[0])) setImmediate(() => process.exit(code));
  },
  (error: unknown) => {
    process.stderr.write(`sluice: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
