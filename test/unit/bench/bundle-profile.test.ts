import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { transformSync } from "esbuild";
import { afterAll, describe, expect, it } from "vitest";
import { remapBundleProfile } from "../../../bench/lib/bundle-profile.ts";
import type { CpuProfile } from "../../../bench/lib/cpu-profile.ts";

describe("remapBundleProfile", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-bundle-profile-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("moves a minified bundle's frames to their original file and line through the map beside it", () => {
    const source =
      "export function first() {\n  return 1;\n}\n\nexport function second() {\n  return Math.random();\n}\n";
    const built = transformSync(source, {
      minify: true,
      sourcemap: "external",
      sourcefile: "src/funcs.ts",
      format: "esm",
    });
    writeFileSync(join(dir, "index.mjs"), built.code);
    writeFileSync(join(dir, "index.mjs.map"), built.map);
    const column = built.code.indexOf("Math.random");
    const frame = (url: string, lineNumber: number, columnNumber: number) => ({
      functionName: "x",
      url,
      lineNumber,
      columnNumber,
    });
    const profile: CpuProfile = {
      nodes: [
        { id: 1, callFrame: frame(pathToFileURL(join(dir, "index.mjs")).href, 0, column) },
        { id: 2, callFrame: frame("node:internal/fs", 3, 4) },
      ],
      startTime: 0,
      endTime: 1,
      samples: [],
      timeDeltas: [],
    };
    const [bundled, builtIn] = remapBundleProfile(profile).nodes;
    expect(bundled?.callFrame).toMatchObject({ url: pathToFileURL(join(dir, "src", "funcs.ts")).href, lineNumber: 5 });
    expect(builtIn?.callFrame).toEqual(profile.nodes[1]?.callFrame);
  });
});
