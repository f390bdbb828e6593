/**
 * `ComponentHost` of local mode (DESIGN.md decision 3): component code runs in sandboxed child
 * processes, a small pool per source (`sandbox-owner-pool.ts`). Two sources never share a process
 * (one could read the other's secret props while both run), and each child reads only its
 * source's bundle folder. Live children of all sources are bounded (`maxProcesses`,
 * `sandbox-budget.ts`): idle ones are stopped, least recently used first, when a source needs one.
 *
 * Work dir layout:
 * - `runtime/sandbox-entry.mjs` the child's program, rebuilt once per Sluice process;
 * - `describe/<sha256>/component.mjs` bundles, content-addressed: evaluated there to read
 *   metadata, and the build every source with that code links to;
 * - `sources/<sourceId>/<sha256>/component.mjs` a source's bundles (hard links).
 *
 * Bundle folders are touched when first used by a Sluice process; at start, the host removes
 * source bundles unused for `bundleRetentionMs` and describe bundles older than a day (and the
 * `owners/` folder of the former layout). A removed bundle is simply rebuilt on its next
 * invocation.
 */
import { copyFile, link, mkdir, readdir, rename, rm, rmdir, stat, utimes } from "node:fs/promises";
import { totalmem } from "node:os";
import { dirname, join } from "node:path";
import type { Plugin } from "esbuild";
import type { ComponentDescription } from "#core/component-model";
import { isDomainError } from "#core/errors";
import type { ComponentHost, InvokeHandlers, SourceCode, WorkflowCode } from "#core/ports/component-host";
import { type Logger, silentLogger } from "#core/ports/logger";
import { sha256Hex } from "#core/sha256";
import type { Invocation, InvocationResult, WorkflowInvocation, WorkflowResult } from "#runtime/protocol";
import { failedResult } from "#runtime/run-invocation";
import { DESCRIBE_DIR, describeComponentInSandbox } from "./component-sandbox.ts";
import { SandboxBudget } from "./sandbox-budget.ts";
import { BUNDLE_FILE, bundleComponent, sandboxEntry } from "./sandbox-bundle.ts";
import { SandboxOwnerPool } from "./sandbox-owner-pool.ts";
import { DEFAULT_BLOCKED_AFTER_MS } from "./sandbox-owner-process.ts";

/** Options of {@link ProcessPoolHost}. */
export interface ProcessPoolHostOptions {
  /** Where bundles and the child's program are written. */
  readonly workDir: string;
  /**
   * V8 old-space cap of each child, in MiB.
   * @default 128
   */
  readonly heapMb?: number;
  /**
   * A child is killed after this long without an invocation in flight.
   * @default 60_000
   */
  readonly idleMs?: number;
  /**
   * Healthy sandbox children per source at most (blocked ones waiting to be killed come on top).
   * A second child only starts below `maxProcesses`, for a source with runs in flight.
   * @default 1
   */
  readonly processes?: number;
  /**
   * Live sandbox children of all sources at most, describes included. At the bound, a source that
   * needs a child stops the least recently used idle one, or waits.
   * @default one per 64 MiB of memory, from 8 to 256 ({@link defaultMaxSandboxProcesses})
   */
  readonly maxProcesses?: number;
  /**
   * A child not heard from for this long counts as blocked: it gets no new work, and the other
   * runs in flight on it move (docs/components.md).
   * @default 300 ({@link DEFAULT_BLOCKED_AFTER_MS})
   */
  readonly blockedAfterMs?: number;
  /**
   * How long describing a component may take (start, evaluate, answer).
   * @default 5000
   */
  readonly describeTimeoutMs?: number;
  /** esbuild plugins that inline npm packages into bundles; without them packages stay external. */
  readonly esbuildPlugins?: readonly Plugin[];
  /** Where a sandbox child's malformed result or response is reported. @default silentLogger */
  readonly log?: Logger;
  /**
   * Owner bundles unused for this long are removed when the host starts.
   * @default 30 days
   */
  readonly bundleRetentionMs?: number;
}

const SOURCES_DIR = "sources";
/** The layout before sources had processes and folders of their own: removed at start. */
const LEGACY_OWNERS_DIR = "owners";
const DAY_MS = 24 * 60 * 60 * 1000;
const DESCRIBE_RETENTION_MS = DAY_MS;

/** A folder name for a source id; ids that are not plain get a hash, never a path. */
const sourceFolder = (sourceId: string) =>
  /^[A-Za-z0-9_-]{1,100}$/.test(sourceId) ? sourceId : `h_${sha256Hex(sourceId)}`;
/** The bundle folder of a source's code: its `codeHash`, hashed afresh only when that is no hex digest. */
const codeFolder = (source: SourceCode) =>
  /^[0-9a-f]{64}$/.test(source.codeHash) ? source.codeHash : sha256Hex(source.code);

const MIB = 1024 * 1024;
/**
 * Live children when not configured: one per 64 MiB of the machine's memory (an idle child takes
 * about 10 MiB of its own, a busy one a few times that), at least 8, at most 256.
 */
export const defaultMaxSandboxProcesses = () => Math.min(256, Math.max(8, Math.floor(totalmem() / (64 * MIB))));

export class ProcessPoolHost implements ComponentHost {
  private readonly workDir: string;
  private readonly heapMb: number;
  private readonly idleMs: number;
  private readonly describeTimeoutMs: number;
  private readonly plugins: readonly Plugin[];
  private readonly maxProcesses: number;
  private readonly blockedAfterMs: number;
  private readonly log: Logger;
  private readonly budget: SandboxBudget;
  /** The pool of each source folder. */
  private readonly pools = new Map<string, SandboxOwnerPool>();
  /** Bundle path per `<source folder>/<hash>`, once built or found in this process. */
  private readonly bundles = new Map<string, Promise<string>>();
  private readonly swept: Promise<void>;
  private closed = false;

  constructor(options: ProcessPoolHostOptions) {
    this.workDir = options.workDir;
    this.heapMb = options.heapMb ?? 128;
    this.idleMs = options.idleMs ?? 60_000;
    this.describeTimeoutMs = options.describeTimeoutMs ?? 5000;
    this.plugins = options.esbuildPlugins ?? [];
    this.maxProcesses = Math.max(1, Math.floor(options.processes ?? 1));
    this.budget = new SandboxBudget(Math.max(1, Math.floor(options.maxProcesses ?? defaultMaxSandboxProcesses())));
    this.blockedAfterMs = options.blockedAfterMs ?? DEFAULT_BLOCKED_AFTER_MS;
    this.log = options.log ?? silentLogger;
    this.swept = sweepBundles(this.workDir, options.bundleRetentionMs ?? 30 * DAY_MS).catch(() => undefined);
  }

  async describe(code: string): Promise<ComponentDescription> {
    // The sweep must not remove an old describe bundle this call has just found and reuses.
    await this.swept;
    // A describe's child counts against the bound too: a flood of them must not fork without end.
    const release = await this.budget.lease();
    try {
      return await describeComponentInSandbox(code, {
        workDir: this.workDir,
        timeoutMs: this.describeTimeoutMs,
        heapMb: this.heapMb,
        esbuildPlugins: this.plugins,
      });
    } finally {
      release();
    }
  }

  async prepare(source: SourceCode): Promise<void> {
    await this.bundleFor(source);
  }

  async invoke(source: SourceCode, invocation: Invocation, handlers?: InvokeHandlers): Promise<InvocationResult> {
    if (this.closed) throw new Error("the component host is closed");
    const startedAt = performance.now();
    // Built alongside the component on the first invoke (sandboxEntry caches it and handles its failure).
    const entry = sandboxEntry(this.workDir);
    let bundlePath: string;
    try {
      bundlePath = await this.bundleFor(source);
    } catch (error) {
      // Code that compiled when it was saved may fail now (an npm package gone): the run fails.
      if (!isDomainError(error)) throw error;
      const compileError = { name: "CompileError", message: error.message, ts: Date.now() };
      return failedResult(invocation.invocationId, compileError, performance.now() - startedAt);
    }
    return this.poolFor(source.sourceId, await entry).invoke(bundlePath, invocation, handlers);
  }

  /** Stops the source's children (runs in flight end with an error) and removes its bundles. */
  async remove(source: Pick<SourceCode, "sourceId" | "ownerId">): Promise<void> {
    const folder = sourceFolder(source.sourceId);
    const pool = this.pools.get(folder);
    this.pools.delete(folder);
    for (const key of this.bundles.keys()) if (key.startsWith(`${folder}/`)) this.bundles.delete(key);
    await pool?.close("the source was removed");
    await rm(join(this.workDir, SOURCES_DIR, folder), { recursive: true, force: true });
  }

  // Placeholders until step 4 of docs/design/workflows.md builds workflow pools: there is
  // nothing to build yet, and nothing can run.
  async prepareWorkflow(_workflow: WorkflowCode): Promise<void> {}

  async invokeWorkflow(_workflow: WorkflowCode, _invocation: WorkflowInvocation): Promise<WorkflowResult> {
    throw new Error("workflows are not available in this host yet");
  }

  async removeWorkflow(_workflow: Pick<WorkflowCode, "workflowId" | "ownerId">): Promise<void> {}

  /** The pid of the source's oldest sandbox child, when one runs. */
  pidOf(sourceId: string): number | undefined {
    return this.pidsOf(sourceId)[0];
  }

  /** The pids of the source's sandbox children, oldest first. */
  pidsOf(sourceId: string): number[] {
    return this.pools.get(sourceFolder(sourceId))?.pids ?? [];
  }

  /** Live sandbox children of all sources (and describes), which `maxProcesses` bounds. */
  get liveProcesses(): number {
    return this.budget.used;
  }

  /** Kills every child; in-flight invocations end with an error. Later invokes throw. */
  async close(): Promise<void> {
    this.closed = true;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((pool) => pool.close("the component host was closed")));
  }

  private poolFor(sourceId: string, entryPath: string): SandboxOwnerPool {
    const folder = sourceFolder(sourceId);
    let pool = this.pools.get(folder);
    if (!pool) {
      pool = new SandboxOwnerPool({
        entryPath,
        sourceDir: `${join(this.workDir, SOURCES_DIR, folder)}/`,
        budget: this.budget,
        heapMb: this.heapMb,
        idleMs: this.idleMs,
        blockedAfterMs: this.blockedAfterMs,
        log: this.log,
        maxProcesses: this.maxProcesses,
        // Sources come and go (and `additionalProps` runs under draft ids): no pool outlives its use.
        onEmpty: (empty) => {
          if (this.pools.get(folder) === empty) this.pools.delete(folder);
        },
      });
      this.pools.set(folder, pool);
    }
    return pool;
  }

  /**
   * The source's bundle of its code: built once per code (in the describe folder, where the
   * component's describe usually built it already) and hard-linked into the source's own folder,
   * the only one its children may read.
   */
  private bundleFor(source: SourceCode): Promise<string> {
    const hash = codeFolder(source);
    const key = `${sourceFolder(source.sourceId)}/${hash}`;
    let bundle = this.bundles.get(key);
    if (!bundle) {
      const outfile = join(this.workDir, SOURCES_DIR, key, BUNDLE_FILE);
      bundle = this.swept
        .then(() => bundleComponent(source.code, join(this.workDir, DESCRIBE_DIR, hash, BUNDLE_FILE), this.plugins))
        .then(async (built) => {
          await mkdir(dirname(outfile), { recursive: true });
          await linkOrCopy(built, outfile);
          const now = new Date();
          await utimes(dirname(outfile), now, now);
          return outfile;
        });
      this.bundles.set(key, bundle);
      bundle.catch(() => this.bundles.delete(key));
    }
    return bundle;
  }
}

/** Puts `target` in place as `from`'s content: a hard link where the file system allows one. */
async function linkOrCopy(from: string, target: string): Promise<void> {
  try {
    await link(from, target);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return;
    // A file system without hard links: a copy, renamed into place (never half-written).
    const temporary = `${target}.${process.pid}.${Date.now()}.tmp`;
    await copyFile(from, temporary);
    await rename(temporary, target);
  }
}

/**
 * Removes source bundles untouched for `retentionMs` (and source folders left empty), describe
 * bundles older than a day, and the former layout's `owners/` folder.
 */
async function sweepBundles(workDir: string, retentionMs: number): Promise<void> {
  const now = Date.now();
  await rm(join(workDir, LEGACY_OWNERS_DIR), { recursive: true, force: true });
  await removeOlderThan(join(workDir, DESCRIBE_DIR), now - DESCRIBE_RETENTION_MS);
  const sourcesDir = join(workDir, SOURCES_DIR);
  for (const source of await children(sourcesDir)) {
    await removeOlderThan(join(sourcesDir, source), now - retentionMs);
    // Fails unless empty, which is the point.
    await rmdir(join(sourcesDir, source)).catch(() => undefined);
  }
}

async function removeOlderThan(dir: string, cutoff: number): Promise<void> {
  for (const name of await children(dir)) {
    const path = join(dir, name);
    const info = await stat(path).catch(() => undefined);
    if (info?.isDirectory() && info.mtimeMs < cutoff) await rm(path, { recursive: true, force: true });
  }
}

const children = (dir: string) => readdir(dir).catch(() => [] as string[]);
