/**
 * Preloaded into the server with `NODE_OPTIONS=--import <this file>` when the bench runs with
 * `--profile`: Node 20 does not accept `--cpu-prof` in NODE_OPTIONS, and the server is started
 * the way test/support/local-process.ts starts it. It does what `--cpu-prof` does through the
 * inspector: profiles the whole process and writes `CPU.<pid>.cpuprofile` into
 * `$BENCH_CPU_PROFILE_DIR` when the process exits. tsx runs TypeScript as whitespace-minified
 * JavaScript, so each frame's position is mapped back to the TypeScript source first (source maps
 * are enabled for that; they only cost when stack traces are made).
 */
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { findSourceMap } from "node:module";
import { join } from "node:path";

/** Rewrites frames' 0-based line and column to the original source's, where a source map knows them. */
function mapFrames(profile) {
  for (const node of profile.nodes) {
    const frame = node.callFrame;
    if (!frame.url?.startsWith("file:")) continue;
    try {
      const entry = findSourceMap(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber);
      if (entry && typeof entry.originalLine === "number") {
        frame.lineNumber = entry.originalLine;
        frame.columnNumber = entry.originalColumn;
      }
    } catch {}
  }
  return profile;
}

const dir = process.env.BENCH_CPU_PROFILE_DIR;
if (dir) {
  process.setSourceMapsEnabled(true);
  const session = new Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: 1000 });
  session.post("Profiler.start");
  let written = false;
  process.on("exit", () => {
    if (written) return;
    written = true;
    // The main-thread session answers synchronously, so this completes before the process ends.
    session.post("Profiler.stop", (error, result) => {
      if (!error) writeFileSync(join(dir, `CPU.${process.pid}.cpuprofile`), JSON.stringify(mapFrames(result.profile)));
    });
  });
}
