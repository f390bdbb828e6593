import { describe, expect, it } from "vitest";
import {
  cpuMsByRole,
  descendantsOf,
  type ProcSample,
  parsePssBytes,
  parseStat,
  parseVmRssBytes,
  readTree,
  roleOf,
  totalPss,
  totalRss,
} from "../../../bench/lib/proc.ts";

// proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime ... starttime
const statLine = (pid: number, comm: string, ppid: number, utime: number, stime: number, start: number) =>
  `${pid} (${comm}) S ${ppid} 1 1 0 -1 4194560 100 0 0 0 ${utime} ${stime} 0 0 20 0 11 0 ${start} 1000000 2000 18446744073709551615\n`;

describe("parseStat", () => {
  it("reads pid, command, parent, CPU ticks and start time", () => {
    expect(parseStat(statLine(42, "node", 7, 150, 30, 99_000))).toEqual({
      pid: 42,
      comm: "node",
      ppid: 7,
      utimeTicks: 150,
      stimeTicks: 30,
      startTicks: 99_000,
    });
  });

  it("copes with spaces and parentheses in the command name", () => {
    const stat = parseStat(statLine(5, "we (ird) name) ", 1, 3, 4, 77));
    expect(stat).toMatchObject({ pid: 5, comm: "we (ird) name) ", ppid: 1, utimeTicks: 3, startTicks: 77 });
  });

  it("refuses text that is not a stat line", () => {
    expect(() => parseStat("garbage")).toThrow(/not a \/proc stat line/);
  });
});

describe("parseVmRssBytes", () => {
  it("reads VmRSS in bytes, or 0 when absent", () => {
    expect(parseVmRssBytes("Name:\tnode\nVmPeak:\t 999 kB\nVmRSS:\t   123456 kB\nThreads:\t11\n")).toBe(123456 * 1024);
    expect(parseVmRssBytes("Name:\tzombie\nState:\tZ (zombie)\n")).toBe(0);
  });
});

describe("parsePssBytes", () => {
  it("reads Pss (not Pss_Anon or Rss) of smaps_rollup in bytes, or 0 when absent", () => {
    const rollup =
      "55d0-7ffd ---p 00000000 00:00 0  [rollup]\nRss:  41000 kB\nPss:   9000 kB\nPss_Anon:  6000 kB\nPss_File:  3000 kB\n";
    expect(parsePssBytes(rollup)).toBe(9000 * 1024);
    expect(parsePssBytes("")).toBe(0);
  });
});

describe("descendantsOf", () => {
  const all = [
    { pid: 1, ppid: 0 },
    { pid: 10, ppid: 1 },
    { pid: 11, ppid: 10 },
    { pid: 12, ppid: 10 },
    { pid: 13, ppid: 11 },
    { pid: 20, ppid: 1 },
  ];

  it("lists the root then every process below it, breadth first", () => {
    expect(descendantsOf(10, all)).toEqual([10, 11, 12, 13]);
    expect(descendantsOf(13, all)).toEqual([13]);
  });

  it("is empty when the root is gone", () => {
    expect(descendantsOf(99, all)).toEqual([]);
  });
});

const sample = (pid: number, role: string, rssMiB: number, ticks: number, start = 1): ProcSample => ({
  pid,
  comm: "node",
  ppid: 1,
  utimeTicks: ticks,
  stimeTicks: 0,
  startTicks: start,
  rssBytes: rssMiB * 1024 * 1024,
  role,
});

describe("totals", () => {
  it("sums the resident memory of every process of the tree", () => {
    expect(totalRss([sample(1, "server", 100, 0), sample(2, "sandbox", 60, 0), sample(3, "esbuild", 20, 0)])).toBe(
      180 * 1024 * 1024,
    );
    expect(totalRss([])).toBe(0);
  });

  it("sums proportional memory where it was read", () => {
    expect(totalPss([{ pssBytes: 3 }, {}, { pssBytes: 4 }])).toBe(7);
  });

  it("charges CPU between two snapshots by role; a process new since the first counts in full", () => {
    const before = [sample(1, "server", 0, 100), sample(2, "sandbox", 0, 50)];
    const after = [sample(1, "server", 0, 400), sample(2, "sandbox", 0, 60), sample(3, "sandbox", 0, 20)];
    expect(cpuMsByRole(before, after)).toEqual({ server: 3000, sandbox: 300 });
  });

  it("does not mistake a reused pid for the process it replaced", () => {
    const before = [sample(2, "sandbox", 0, 500, 1)];
    const after = [sample(2, "sandbox", 0, 30, 2)];
    expect(cpuMsByRole(before, after)).toEqual({ sandbox: 300 });
  });
});

describe("roleOf", () => {
  it("names the server, sandbox children and esbuild", () => {
    expect(roleOf(5, 5, "node --import tsx bin/sluice.ts start", "node")).toBe("server");
    expect(roleOf(6, 5, "node --experimental-permission /x/runtime/sandbox-entry.mjs", "node")).toBe("sandbox");
    expect(roleOf(7, 5, "/repo/node_modules/@esbuild/linux-x64/bin/esbuild --service=0.28.2", "esbuild")).toBe(
      "esbuild",
    );
    expect(roleOf(8, 5, "sh -c true", "sh")).toBe("sh");
  });
});

describe("readTree", () => {
  it("finds this very process in /proc with its memory", async () => {
    const tree = await readTree(process.pid);
    expect(tree[0]).toMatchObject({ pid: process.pid, role: "server" });
    expect(tree[0]!.rssBytes).toBeGreaterThan(1024 * 1024);
    expect(tree[0]!.pssBytes).toBeUndefined();
  });

  it("reads PSS when asked, at most the RSS", async () => {
    const [self] = await readTree(process.pid, { pss: true });
    expect(self!.pssBytes).toBeGreaterThan(1024 * 1024);
    expect(self!.pssBytes).toBeLessThanOrEqual(self!.rssBytes + 1024 * 1024);
  });
});
