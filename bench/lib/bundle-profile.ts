/**
 * CPU profiles of a minified Lambda bundle read back as the sources it was built from: each frame
 * of the bundle's file is moved to its original file and line through the bundle's source map
 * (`index.mjs.map` beside it), so that `selfTime` ranks files and packages, not offsets in one
 * minified line.
 */
import { existsSync, readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { dirname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { CpuProfile } from "./cpu-profile.ts";

/**
 * `profile` with the frames of every bundle file that has a `.map` beside it mapped to their
 * original file and line (a relative source resolved against the map's folder); other frames
 * unchanged.
 */
export function remapBundleProfile(profile: CpuProfile): CpuProfile {
  const maps = new Map<string, SourceMap | undefined>();
  const mapOf = (url: string) => {
    if (!maps.has(url)) {
      let map: SourceMap | undefined;
      try {
        const file = `${fileURLToPath(url)}.map`;
        if (existsSync(file)) map = new SourceMap(JSON.parse(readFileSync(file, "utf8")));
      } catch {}
      maps.set(url, map);
    }
    return maps.get(url);
  };
  return {
    ...profile,
    nodes: profile.nodes.map((node) => {
      const frame = node.callFrame;
      if (!frame.url.startsWith("file:")) return node;
      const entry = mapOf(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber ?? 0);
      if (!entry || !("originalSource" in entry) || !entry.originalSource) return node;
      const source = entry.originalSource.startsWith("file:")
        ? fileURLToPath(entry.originalSource)
        : resolve(dirname(fileURLToPath(frame.url)), entry.originalSource);
      return {
        ...node,
        callFrame: {
          ...frame,
          url: pathToFileURL(source).href,
          lineNumber: entry.originalLine,
          columnNumber: entry.originalColumn,
          functionName: (entry as { name?: string }).name ?? frame.functionName,
        },
      };
    }),
  };
}
