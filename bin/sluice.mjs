#!/usr/bin/env node
/*
 * The installable `sluice` command (package.json `bin`). Plain JavaScript, so that Node runs it
 * with no loader given on its command line. It runs the build of bin/sluice.ts that launch.mjs
 * keeps fresh under node_modules/.cache/sluice/ (decision 568); where there is none, it registers
 * tsx from this checkout's own node_modules (resolved from this file, not from the caller's
 * directory, so a `sluice` linked onto the PATH works from anywhere) and loads the TypeScript.
 */
import { builtEntry } from "./launch.mjs";

const entry = await builtEntry();
if (entry) {
  process.setSourceMapsEnabled(true);
  await import(entry);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("./sluice.ts");
}
