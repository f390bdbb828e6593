import { readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { REPO_ROOT } from "../../test/support/local-process.ts";
import { monoMs, withDeadline } from "./clock.ts";
import { type CpuProfile, selfTime } from "./cpu-profile.ts";
import { cpuMsByRole, readTree } from "./proc.ts";
import {
  type BenchChild,
  type BenchServer,
  type StartServerOptions,
  startReference,
  startServer,
} from "./processes.ts";
import type { Row, ScenarioReport } from "./report.ts";

/** What a scenario gets from the runner. Every process it starts through it is stopped afterwards. */
export interface ScenarioContext {
  readonly name: string;
  readonly quick: boolean;
  readonly profile: boolean;
  /** Where this scenario's profiles go with `--profile` (`<results>/profiles/<scenario>`). */
  readonly profileDir: string;
  log(message: string): void;
  /** `fullMs`, or `quickMs` with `--quick`. */
  pick<T>(full: T, quick: T): T;
  /** Local mode, profiled with `--profile` unless `profile: false` (e.g. a server only used to seed data). */
  startServer(options?: StartServerOptions & { profile?: boolean }): Promise<BenchServer>;
  /** The bare reference server in its own process. */
  startReference(): Promise<BenchChild & { url: string }>;
  /** Runs at the end of the scenario, last registered first, whatever happened. */
  defer(cleanup: () => unknown): void;
  /**
   * Runs `task` as a measured window: the CPU time of `server`'s process tree in it is added to
   * the scenario's CPU figures, and with `--profile` only these windows are ranked.
   */
  measure<T>(server: BenchServer, task: () => Promise<T>): Promise<T>;
  /** CPU ms by process role summed over the measured windows so far. */
  cpuMs(): Record<string, number>;
  /** Free-text notes for the report (how it was measured, caveats). */
  note(text: string): void;
}

export interface ScenarioOutcome {
  rows: Row[];
  details?: Record<string, unknown>;
}

export interface Scenario {
  name: string;
  title: string;
  /** Hard limits of the whole scenario, setup and stop included. */
  deadlineMs: number;
  quickDeadlineMs: number;
  /**
   * Set when the scenario needs more than the machine `npm run bench` assumes (moto, Python): it
   * runs only when named by `--only`, and this says what it needs.
   */
  optIn?: string;
  run(context: ScenarioContext): Promise<ScenarioOutcome>;
  /** Rows with no measurement, for a scenario that failed. */
  emptyRows(): Row[];
}

export interface RunScenarioOptions {
  quick: boolean;
  profile: boolean;
  resultsDir: string;
  log(message: string): void;
}

/** The scenarios a run takes: those `only` names, or without `only` every one but the opt-in ones. */
export function selectScenarios<T extends Pick<Scenario, "name" | "optIn">>(
  scenarios: readonly T[],
  only: readonly string[],
): T[] {
  return scenarios.filter((scenario) =>
    only.length === 0 ? scenario.optIn === undefined : only.includes(scenario.name),
  );
}

/** Runs one scenario under its deadline, always stopping what it started. */
export async function runScenario(scenario: Scenario, options: RunScenarioOptions): Promise<ScenarioReport> {
  const cleanups: (() => unknown)[] = [];
  const notes: string[] = [];
  const cpuMs: Record<string, number> = {};
  const windows: [number, number][] = [];
  const profileDir = join(options.resultsDir, "profiles", scenario.name);
  let profiledDir: string | undefined;
  const log = (message: string) => options.log(`[${scenario.name}] ${message}`);

  const context: ScenarioContext = {
    name: scenario.name,
    quick: options.quick,
    profile: options.profile,
    profileDir,
    log,
    pick: (full, quick) => (options.quick ? quick : full),
    async startServer(serverOptions = {}) {
      const { profile = true, ...rest } = serverOptions;
      const wantsProfile = options.profile && profile;
      if (wantsProfile && profiledDir === undefined) {
        // Profiles of an earlier run of this scenario would be mistaken for this one's.
        rmSync(profileDir, { recursive: true, force: true });
        profiledDir = profileDir;
      }
      const server = await startServer({ ...rest, ...(wantsProfile ? { profileDir } : {}) });
      cleanups.push(() => server.stop());
      return server;
    },
    async startReference() {
      const reference = await startReference();
      cleanups.push(() => reference.stop());
      return reference;
    },
    defer: (cleanup) => cleanups.push(cleanup),
    async measure(server, task) {
      const before = await readTree(server.pid);
      const from = monoMs();
      try {
        return await task();
      } finally {
        const to = monoMs();
        windows.push([from * 1000, to * 1000]);
        const after = await readTree(server.pid);
        for (const [role, ms] of Object.entries(cpuMsByRole(before, after))) cpuMs[role] = (cpuMs[role] ?? 0) + ms;
      }
    },
    cpuMs: () => ({ ...cpuMs }),
    note: (text) => notes.push(text),
  };

  const started = monoMs();
  const deadlineMs = options.quick ? scenario.quickDeadlineMs : scenario.deadlineMs;
  let status: ScenarioReport["status"] = "ok";
  let message: string | undefined;
  let outcome: ScenarioOutcome | undefined;
  try {
    // A run still going at its deadline may reject later, once its processes are stopped: the race handles that.
    outcome = await withDeadline(`the ${scenario.name} scenario`, deadlineMs, () => scenario.run(context));
  } catch (error) {
    status = "failed";
    message = error instanceof Error ? error.message : String(error);
    log(`${status}: ${message}`);
  } finally {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch (error) {
        log(`cleanup failed: ${String(error)}`);
      }
    }
  }

  const report: ScenarioReport = {
    name: scenario.name,
    title: scenario.title,
    status,
    ...(message === undefined ? {} : { message }),
    elapsedMs: monoMs() - started,
    rows: outcome?.rows ?? scenario.emptyRows(),
    details: { ...outcome?.details, notes },
    ...(Object.keys(cpuMs).length ? { cpuMs } : {}),
  };
  if (profiledDir) {
    const profile = readNewestProfile(profiledDir);
    if (profile) {
      report.profile = {
        file: relative(REPO_ROOT, profile.file),
        ...selfTime(profile.data, { windows, repoRoot: REPO_ROOT }),
      };
    }
  }
  return report;
}

function readNewestProfile(dir: string): { file: string; data: CpuProfile } | undefined {
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith(".cpuprofile"));
  } catch {
    return undefined;
  }
  const newest = names
    .map((name) => ({ file: join(dir, name), at: statSync(join(dir, name)).mtimeMs }))
    .sort((a, b) => a.at - b.at)
    .at(-1);
  if (!newest) return undefined;
  const { file } = newest;
  return { file, data: JSON.parse(readFileSync(file, "utf8")) as CpuProfile };
}
