/**
 * Reads a V8 CPU profile (`node --cpu-prof`, a `.cpuprofile` file) and ranks functions by self
 * time. Sample timestamps are microseconds on the machine's monotonic clock, the clock of
 * `monoMs()`, so the ranking can be limited to the windows a scenario measured.
 */

export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number; columnNumber?: number };
    children?: number[];
  }[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTimeEntry {
  /** `name (file:line)`; V8's pseudo-frames keep their names: `(garbage collector)`, `(program)`. */
  label: string;
  file: string;
  selfMs: number;
  /** Share of the busy (non-idle) time in the windows. */
  share: number;
}

export interface SelfTimeSummary {
  /** Sampled time in the windows, idle included. */
  totalMs: number;
  idleMs: number;
  /** Functions by self time, largest first (idle left out). */
  top: SelfTimeEntry[];
  /** The same time grouped by file (a package for node_modules), largest first. */
  byFile: { file: string; selfMs: number; share: number }[];
}

/** Shortens a frame's URL: repository-relative paths, `pkg:<name>` for node_modules, `node:` for built-ins. */
export function shortFile(url: string, repoRoot = ""): string {
  if (!url) return "";
  const path = url.replace(/^file:\/\//, "");
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (modules?.[1]) {
    // The innermost package is the one whose code ran.
    const all = [...path.matchAll(/node_modules\/((?:@[^/]+\/)?[^/]+)/g)];
    return `pkg:${all[all.length - 1]?.[1] ?? modules[1]}`;
  }
  if (repoRoot && path.startsWith(repoRoot)) return path.slice(repoRoot.length).replace(/^\//, "");
  return path;
}

/** Self time per function within `windows` (µs pairs on the profile's clock; the whole profile when empty). */
export function selfTime(
  profile: CpuProfile,
  { windows = [] as readonly (readonly [number, number])[], limit = 15, repoRoot = "" } = {},
): SelfTimeSummary {
  const byNode = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<number, number>();
  let at = profile.startTime;
  const inWindow = (t: number) => windows.length === 0 || windows.some(([from, to]) => t >= from && t <= to);
  for (let index = 0; index < profile.samples.length; index++) {
    const delta = profile.timeDeltas[index] ?? 0;
    at += delta;
    if (!inWindow(at)) continue;
    // A sample stands for the time until the next one.
    const next = profile.timeDeltas[index + 1] ?? 0;
    const id = profile.samples[index] as number;
    selfUs.set(id, (selfUs.get(id) ?? 0) + next);
  }
  const byLabel = new Map<string, { file: string; us: number }>();
  let totalUs = 0;
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const frame = byNode.get(id)?.callFrame;
    if (!frame) continue;
    totalUs += us;
    if (frame.functionName === "(idle)") {
      idleUs += us;
      continue;
    }
    const file = shortFile(frame.url, repoRoot);
    const name = frame.functionName || "(anonymous)";
    const label = file ? `${name} (${file}:${frame.lineNumber + 1})` : name;
    const entry = byLabel.get(label) ?? { file: file || name, us: 0 };
    entry.us += us;
    byLabel.set(label, entry);
  }
  const busyUs = totalUs - idleUs;
  const share = (us: number) => (busyUs > 0 ? us / busyUs : 0);
  const files = new Map<string, number>();
  for (const { file, us } of byLabel.values()) files.set(file, (files.get(file) ?? 0) + us);
  return {
    totalMs: totalUs / 1000,
    idleMs: idleUs / 1000,
    top: [...byLabel]
      .sort((a, b) => b[1].us - a[1].us)
      .slice(0, limit)
      .map(([label, { file, us }]) => ({ label, file, selfMs: us / 1000, share: share(us) })),
    byFile: [...files]
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([file, us]) => ({ file, selfMs: us / 1000, share: share(us) })),
  };
}
