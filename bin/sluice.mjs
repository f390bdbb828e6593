#!/usr/bin/env node
/*
 * The installable `sluice` command (package.json `bin`). Plain JavaScript, so that Node runs it
 * with no loader given on its command line: it registers tsx from this checkout's own
 * node_modules (resolved from this file, not from the caller's directory, so a `sluice` linked
 * onto the PATH works from anywhere), then loads the TypeScript entry.
 */
import { register } from "tsx/esm/api";

register();
await import("./sluice.ts");
