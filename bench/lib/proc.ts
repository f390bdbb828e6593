/**
 * Memory and CPU of a process tree from Linux's /proc: the server and every process below it
 * (sandbox children, esbuild's service). The parsers are pure; `readTree` does the reading.
 */
import { readdir, readFile } from "node:fs/promises";

/** What `/proc/<pid>/stat` says about a process (fields as in proc(5)). */
export interface ProcStat {
  pid: number;
  comm: string;
  ppid: number;
  /** User and system CPU time, in clock ticks. */
  utimeTicks: number;
  stimeTicks: number;
  /** Start time after boot, in clock ticks: with the pid, identifies the process. */
  startTicks: number;
}

/**
 * Parses one `/proc/<pid>/stat` line. The command name is in parentheses and may itself hold
 * spaces and parentheses, so fields are counted from the last `)`.
 */
export function parseStat(text: string): ProcStat {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) throw new Error(`not a /proc stat line: ${text.slice(0, 80)}`);
  const pid = Number(text.slice(0, open).trim());
  const comm = text.slice(open + 1, close);
  // After the name: state(3) ppid(4) ... utime(14) stime(15) ... starttime(22).
  const fields = text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  const field = (n: number) => Number(fields[n - 3]);
  return {
    pid,
    comm,
    ppid: field(4),
    utimeTicks: field(14),
    stimeTicks: field(15),
    startTicks: field(22),
  };
}

/** `VmRSS` of a `/proc/<pid>/status` text, in bytes (0 when absent, e.g. a zombie). */
export function parseVmRssBytes(statusText: string): number {
  const match = /^VmRSS:\s+(\d+)\s*kB/m.exec(statusText);
  return match ? Number(match[1]) * 1024 : 0;
}

/**
 * `Pss` of a `/proc/<pid>/smaps_rollup` text, in bytes (0 when absent): resident memory with each
 * page shared by n processes counted 1/n in each, so that a sum over processes counts a shared page
 * once (the Node binary's pages, which every sandbox child maps).
 */
export function parsePssBytes(smapsRollupText: string): number {
  const match = /^Pss:\s+(\d+)\s*kB/m.exec(smapsRollupText);
  return match ? Number(match[1]) * 1024 : 0;
}

/** `root` and every process below it, from a snapshot of all processes; root first, then breadth first. */
export function descendantsOf(root: number, all: readonly Pick<ProcStat, "pid" | "ppid">[]): number[] {
  const children = new Map<number, number[]>();
  for (const { pid, ppid } of all) {
    const list = children.get(ppid) ?? [];
    list.push(pid);
    children.set(ppid, list);
  }
  if (!all.some((entry) => entry.pid === root)) return [];
  const order = [root];
  for (let index = 0; index < order.length; index++) {
    for (const child of children.get(order[index] as number) ?? []) {
      if (!order.includes(child)) order.push(child);
    }
  }
  return order;
}

/** One process of a tree at one moment. */
export interface ProcSample extends ProcStat {
  rssBytes: number;
  /** Read only when asked (`readTree(root, { pss: true })`): the kernel walks the page tables for it. */
  pssBytes?: number;
  /** A short label: `server`, `sandbox`, `esbuild`, or the command name. */
  role: string;
}

/** Labels a process by its command line. */
export function roleOf(pid: number, root: number, cmdline: string, comm: string): string {
  if (pid === root) return "server";
  if (cmdline.includes("sandbox-entry")) return "sandbox";
  if (/esbuild/.test(cmdline)) return "esbuild";
  return comm;
}

/** Total resident memory of the samples, in bytes. */
export const totalRss = (samples: readonly Pick<ProcSample, "rssBytes">[]) =>
  samples.reduce((sum, sample) => sum + sample.rssBytes, 0);

/** Total proportional memory of the samples (read with `pss: true`), in bytes. */
export const totalPss = (samples: readonly Pick<ProcSample, "pssBytes">[]) =>
  samples.reduce((sum, sample) => sum + (sample.pssBytes ?? 0), 0);

/** CPU ms a process used between two samples of the same tree, by role (processes new since count in full). */
export function cpuMsByRole(
  before: readonly ProcSample[],
  after: readonly ProcSample[],
  ticksPerSecond = 100,
): Record<string, number> {
  const key = (sample: ProcSample) => `${sample.pid}/${sample.startTicks}`;
  const earlier = new Map(before.map((sample) => [key(sample), sample]));
  const byRole: Record<string, number> = {};
  for (const sample of after) {
    const then = earlier.get(key(sample));
    const ticks = sample.utimeTicks + sample.stimeTicks - (then ? then.utimeTicks + then.stimeTicks : 0);
    byRole[sample.role] = (byRole[sample.role] ?? 0) + (ticks * 1000) / ticksPerSecond;
  }
  return byRole;
}

/**
 * Reads every process below (and including) `root`, with its PSS when `pss` is set. Processes
 * that vanish meanwhile are skipped.
 */
export async function readTree(root: number, { pss = false } = {}): Promise<ProcSample[]> {
  const names = await readdir("/proc");
  const stats: ProcStat[] = [];
  await Promise.all(
    names
      .filter((name) => /^\d+$/.test(name))
      .map(async (name) => {
        try {
          stats.push(parseStat(await readFile(`/proc/${name}/stat`, "utf8")));
        } catch {}
      }),
  );
  const byPid = new Map(stats.map((stat) => [stat.pid, stat]));
  const samples: ProcSample[] = [];
  for (const pid of descendantsOf(root, stats)) {
    try {
      const [status, cmdline, rollup] = await Promise.all([
        readFile(`/proc/${pid}/status`, "utf8"),
        readFile(`/proc/${pid}/cmdline`, "utf8"),
        pss ? readFile(`/proc/${pid}/smaps_rollup`, "utf8") : undefined,
      ]);
      const stat = byPid.get(pid) as ProcStat;
      samples.push({
        ...stat,
        rssBytes: parseVmRssBytes(status),
        ...(rollup === undefined ? {} : { pssBytes: parsePssBytes(rollup) }),
        role: roleOf(pid, root, cmdline.replaceAll("\0", " "), stat.comm),
      });
    } catch {}
  }
  return samples;
}

/** Whether `pid` is still the process that started at `startTicks` (guards against pid reuse). */
export async function isSameProcess(pid: number, startTicks: number): Promise<boolean> {
  try {
    return parseStat(await readFile(`/proc/${pid}/stat`, "utf8")).startTicks === startTicks;
  } catch {
    return false;
  }
}
