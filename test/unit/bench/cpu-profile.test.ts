import { describe, expect, it } from "vitest";
import { type CpuProfile, selfTime, shortFile } from "../../../bench/lib/cpu-profile.ts";

const frame = (functionName: string, url = "", lineNumber = 0) => ({ functionName, url, lineNumber, columnNumber: 0 });

/** root(1) → idle(2), handler(3) → parse(4); gc(5). Samples every 1000 µs from t=10_000. */
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame("(root)"), children: [2, 3, 5] },
    { id: 2, callFrame: frame("(idle)") },
    { id: 3, callFrame: frame("handle", "file:///repo/functions/local-mode/server.ts", 9), children: [4] },
    { id: 4, callFrame: frame("parse", "file:///repo/node_modules/zod/v4/core/parse.js", 99) },
    { id: 5, callFrame: frame("(garbage collector)") },
  ],
  startTime: 10_000,
  endTime: 20_000,
  // Sample i is at 10_000 + 1000 × (i + 1) and stands for the 1000 µs until the next one.
  samples: [3, 4, 4, 2, 2, 5, 3, 4, 4, 4],
  timeDeltas: [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
};

describe("selfTime", () => {
  it("ranks functions by self time, leaving idle out of the shares", () => {
    const summary = selfTime(profile, { repoRoot: "/repo/" });
    // The last sample has no successor, so it stands for no time.
    expect(summary.totalMs).toBe(9);
    expect(summary.idleMs).toBe(2);
    expect(summary.top.map((entry) => [entry.label, entry.selfMs])).toEqual([
      ["parse (pkg:zod:100)", 4],
      ["handle (functions/local-mode/server.ts:10)", 2],
      ["(garbage collector)", 1],
    ]);
    expect(summary.top[0]!.share).toBeCloseTo(4 / 7);
    expect(summary.byFile.map((file) => file.file)).toEqual([
      "pkg:zod",
      "functions/local-mode/server.ts",
      "(garbage collector)",
    ]);
  });

  it("counts only the samples inside the windows", () => {
    const summary = selfTime(profile, { windows: [[16_500, 20_000]], repoRoot: "/repo/" });
    expect(summary.top.map((entry) => [entry.label, entry.selfMs])).toEqual([
      ["parse (pkg:zod:100)", 2],
      ["handle (functions/local-mode/server.ts:10)", 1],
    ]);
    const two = selfTime(profile, {
      windows: [
        [11_000, 12_000],
        [16_000, 16_000],
      ],
    });
    expect(two.top.map((entry) => entry.label).sort()).toEqual([
      "(garbage collector)",
      "handle (/repo/functions/local-mode/server.ts:10)",
      "parse (pkg:zod:100)",
    ]);
  });

  it("keeps at most `limit` functions", () => {
    expect(selfTime(profile, { limit: 1 }).top).toHaveLength(1);
  });
});

describe("shortFile", () => {
  it("names packages by their innermost node_modules folder and repository files relatively", () => {
    expect(shortFile("file:///r/node_modules/a/node_modules/@scope/b/x.js", "/r/")).toBe("pkg:@scope/b");
    expect(shortFile("file:///r/functions/core/x.ts", "/r/")).toBe("functions/core/x.ts");
    expect(shortFile("node:internal/http", "/r/")).toBe("node:internal/http");
    expect(shortFile("", "/r/")).toBe("");
  });
});
