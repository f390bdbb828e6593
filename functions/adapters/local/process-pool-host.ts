/**
 * `ComponentHost` of local mode (DESIGN.md decision 3): component code runs in sandboxed child
 * processes, a small pool per source and one per workflow (`sandbox-owner-pool.ts`). No two
 * sources or workflows share a process (one could read the other's secret props while both run),
 * and each child reads only its own bundle folder. Live children of all pools are bounded
 * (`maxProcesses`, `sandbox-budget.ts`): idle ones are stopped, least recently used first, when a
 * pool needs one.
 *
 * Work dir layout:
 * - `runtime/sandbox-entry.mjs` the child's program, rebuilt once per Sluice process;
 * - `describe/<sha256>/component.mjs` bundles, content-addressed: evaluated there to read
 *   metadata, and the build every source and workflow step with that code links to;
 * - `sources/<sourceId>/<sha256>/component.mjs` a source's bundles (hard links);
 * - `workflows/<workflowId>/<sha256 of its step hashes>/steps/<sha256>.mjs` a workflow's step
 *   modules (hard links), one folder per set of step modules.
 *
 * Bundle folders are touched when first used by a Sluice process; at start, the host removes
 * source and workflow bundles unused for `bundleRetentionMs` and describe bundles older than a day
 * (and the `owners/` folder of the former layout). A removed bundle is simply rebuilt on its next
 * invocation.
 */
import { copyFile, link, mkdir, readdir, rename, rm, rmdir, stat, utimes } from "node:fs/promises";
import { totalmem } from "node:os";
import { dirname, join } from "node:path";
import type { Plugin } from "esbuild";
import type { ComponentDescription } from "#core/component-model";
import { isDomainError, notFound } from "#core/errors";
import type { ComponentHost, InvokeHandlers, SourceCode, WorkflowCode } from "#core/ports/component-host";
import { type Logger, silentLogger } from "#core/ports/logger";
import { sha256Hex } from "#core/sha256";
import type { ErrorRecord, Invocation, InvocationResult, WorkflowInvocation, WorkflowResult } from "#runtime/protocol";
import { failedResult } from "#runtime/run-invocation";
import { failedWorkflowResult } from "#runtime/run-workflow";
import { DESCRIBE_DIR, describeComponentInSandbox } from "./component-sandbox.ts";
import { SandboxBudget } from "./sandbox-budget.ts";
import { BUNDLE_FILE, bundleComponent, isBundled, sandboxEntry, sourceMapOf } from "./sandbox-bundle.ts";
import { SandboxOwnerPool } from "./sandbox-owner-pool.ts";
import { DEFAULT_BLOCKED_AFTER_MS } from "./sandbox-owner-process.ts";
import { clearTmpRoot, type SandboxTmpSettings } from "./sandbox-tmp.ts";

/** What a sandbox child's `/tmp` may hold by default, in MiB: Lambda's default. */
export const DEFAULT_SANDBOX_TMP_MB = 512;
/** The folder under the work dir where the children's `/tmp` folders are made. */
const TMP_DIR = "tmp";

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
   * What each child's `/tmp` (a folder of its own under `<workDir>/tmp/`) may hold, in MiB, and the
   * largest file in it; 0: children write nothing (`sandbox-tmp.ts`).
   * @default 512 ({@link DEFAULT_SANDBOX_TMP_MB}, as Lambda's)
   */
  readonly tmpMb?: number;
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
const WORKFLOWS_DIR = "workflows";
/** A workflow's step modules, in its bundle folder. */
const STEPS_DIR = "steps";
type OwnersDir = typeof SOURCES_DIR | typeof WORKFLOWS_DIR;
/** The layout before sources had processes and folders of their own: removed at start. */
const LEGACY_OWNERS_DIR = "owners";
const DAY_MS = 24 * 60 * 60 * 1000;
const DESCRIBE_RETENTION_MS = DAY_MS;

/** A folder name for a source or workflow id; ids that are not plain get a hash, never a path. */
const sourceFolder = (sourceId: string) =>
  /^[A-Za-z0-9_-]{1,100}$/.test(sourceId) ? sourceId : `h_${sha256Hex(sourceId)}`;
/** The bundle name of some code: its `codeHash`, hashed afresh only when that is no hex digest. */
const codeFolder = (source: { codeHash: string; code: string }) =>
  /^[0-9a-f]{64}$/.test(source.codeHash) ? source.codeHash : sha256Hex(source.code);

/** Removed owners remembered ({@link ProcessPoolHost}): a run racing a deletion comes within seconds. */
const REMOVED_KEPT = 10_000;

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
  /** The pool of each workflow folder: never a source's (ids are kept apart even if they met). */
  private readonly workflowPools = new Map<string, SandboxOwnerPool>();
  /** Bundle path per `<source folder>/<hash>`, once built or found in this process. */
  private readonly bundles = new Map<string, Promise<string>>();
  /** Step bundle paths by code hash per `<workflow folder>/<hash of the step hashes>`, likewise. */
  private readonly stepBundles = new Map<string, Promise<Record<string, string>>>();
  /**
   * The same, per `WorkflowCode` object: a caller that keeps one per deployment skips hashing its
   * step set on every run (about 5 µs of the host's 80 or so per run of 3 steps).
   */
  private readonly stepBundlesOf = new WeakMap<
    WorkflowCode,
    { key: string; bundles: Promise<Record<string, string>> }
  >();
  /**
   * Why each removed owner (`<dir>/<folder>`) went, newest {@link REMOVED_KEPT}: its runs fail and
   * nothing is built for it again, as a deleted Lambda function no longer runs. A run racing its
   * owner's deletion so never writes a bundle into the folder being removed, nor leaves one behind.
   */
  private readonly removed = new Map<string, string>();
  /** Removals in progress by `<dir>/<folder>`: a second `DELETE` waits for the first. */
  private readonly removing = new Map<string, Promise<void>>();
  private readonly swept: Promise<void>;
  private closed = false;
  /** The children's `/tmp`; undefined: they write nothing. */
  private readonly tmp: SandboxTmpSettings | undefined;

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
    const tmpMb = options.tmpMb ?? DEFAULT_SANDBOX_TMP_MB;
    const root = join(this.workDir, TMP_DIR);
    // What children of an earlier run left (it was killed before they exited): no child runs yet.
    const left = clearTmpRoot(root);
    if (left) this.log.warn(left);
    if (tmpMb > 0) this.tmp = { root, maxBytes: tmpMb * 1024 * 1024 };
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
    this.refuseRemoved(SOURCES_DIR, source.sourceId);
    await this.bundleFor(source);
  }

  async invoke(source: SourceCode, invocation: Invocation, handlers?: InvokeHandlers): Promise<InvocationResult> {
    if (this.closed) throw new Error("the component host is closed");
    const startedAt = performance.now();
    const removed = this.removedWhy(SOURCES_DIR, source.sourceId);
    if (removed !== undefined) return failedResult(invocation.invocationId, sandboxError(removed), 0);
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
    const entryPath = await entry;
    // Removed while its bundle was built: no new pool for it.
    const removedMeanwhile = this.removedWhy(SOURCES_DIR, source.sourceId);
    if (removedMeanwhile !== undefined) {
      return failedResult(invocation.invocationId, sandboxError(removedMeanwhile), performance.now() - startedAt);
    }
    return this.poolFor(this.pools, SOURCES_DIR, source.sourceId, entryPath).invoke(bundlePath, invocation, handlers);
  }

  /** Stops the source's children (runs in flight end with an error) and removes its bundles. */
  async remove(source: Pick<SourceCode, "sourceId" | "ownerId">): Promise<void> {
    await this.removeOwner(this.pools, this.bundles, SOURCES_DIR, source.sourceId, "the source was removed");
  }

  async prepareWorkflow(workflow: WorkflowCode): Promise<void> {
    this.refuseRemoved(WORKFLOWS_DIR, workflow.workflowId);
    await this.stepBundlesFor(workflow);
  }

  /**
   * Runs one run of the workflow in its own pool. Its steps' bundles are built first if needed
   * (`prepareWorkflow` usually did); one that no longer builds fails the run with a
   * `CompileError`, as a source's does.
   */
  async invokeWorkflow(
    workflow: WorkflowCode,
    invocation: WorkflowInvocation,
    handlers?: InvokeHandlers,
  ): Promise<WorkflowResult> {
    if (this.closed) throw new Error("the component host is closed");
    const startedAt = performance.now();
    const removed = this.removedWhy(WORKFLOWS_DIR, workflow.workflowId);
    if (removed !== undefined) return failedWorkflowResult(invocation.invocationId, sandboxError(removed), 0);
    const entry = sandboxEntry(this.workDir);
    let stepBundles: Record<string, string>;
    try {
      stepBundles = await this.stepBundlesFor(workflow);
    } catch (error) {
      if (!isDomainError(error)) throw error;
      const compileError: ErrorRecord = { name: "CompileError", message: error.message, ts: Date.now() };
      return failedWorkflowResult(invocation.invocationId, compileError, performance.now() - startedAt);
    }
    const entryPath = await entry;
    const removedMeanwhile = this.removedWhy(WORKFLOWS_DIR, workflow.workflowId);
    if (removedMeanwhile !== undefined) {
      return failedWorkflowResult(
        invocation.invocationId,
        sandboxError(removedMeanwhile),
        performance.now() - startedAt,
      );
    }
    const pool = this.poolFor(this.workflowPools, WORKFLOWS_DIR, workflow.workflowId, entryPath);
    return pool.invokeWorkflow(stepBundles, invocation, handlers);
  }

  /** Stops the workflow's children (runs in flight end with an error) and removes its bundles. */
  async removeWorkflow(workflow: Pick<WorkflowCode, "workflowId" | "ownerId">): Promise<void> {
    const why = "the workflow was removed";
    await this.removeOwner(this.workflowPools, this.stepBundles, WORKFLOWS_DIR, workflow.workflowId, why);
  }

  /**
   * Stops the pool of `id` in `pools`, forgets its bundles in `built` and deletes its folder. From
   * the first call on, the owner's runs fail with `why` and nothing is built for it; builds already
   * under way finish before the folder goes, so that none writes into it while it is removed.
   */
  private removeOwner(
    pools: Map<string, SandboxOwnerPool>,
    built: Map<string, Promise<unknown>>,
    dir: OwnersDir,
    id: string,
    why: string,
  ): Promise<void> {
    const folder = sourceFolder(id);
    const owner = `${dir}/${folder}`;
    const under = this.removing.get(owner);
    if (under) return under;
    this.removed.delete(owner);
    this.removed.set(owner, why);
    if (this.removed.size > REMOVED_KEPT) this.removed.delete(this.removed.keys().next().value as string);
    const pool = pools.get(folder);
    pools.delete(folder);
    const building: Promise<unknown>[] = [];
    for (const [key, bundle] of built) {
      if (!key.startsWith(`${folder}/`)) continue;
      building.push(bundle);
      built.delete(key);
    }
    const removal = (async () => {
      await Promise.allSettled(building);
      await pool?.close(why);
      await rm(join(this.workDir, dir, folder), { recursive: true, force: true });
    })().finally(() => this.removing.delete(owner));
    this.removing.set(owner, removal);
    return removal;
  }

  private removedWhy(dir: OwnersDir, id: string): string | undefined {
    // On every run: nothing to build or look up while nothing was removed.
    return this.removed.size === 0 ? undefined : this.removed.get(`${dir}/${sourceFolder(id)}`);
  }

  wasRemoved(sourceId: string): boolean {
    return this.removedWhy(SOURCES_DIR, sourceId) !== undefined;
  }

  /** A deploy of an owner removed meanwhile (a `PUT` racing its `DELETE`): 404, as after it. */
  private refuseRemoved(dir: OwnersDir, id: string): void {
    if (this.removedWhy(dir, id) !== undefined) throw notFound(dir === SOURCES_DIR ? "source" : "workflow");
  }

  /** The pid of the source's oldest sandbox child, when one runs. */
  pidOf(sourceId: string): number | undefined {
    return this.pidsOf(sourceId)[0];
  }

  /** The pids of the source's sandbox children, oldest first. */
  pidsOf(sourceId: string): number[] {
    return this.pools.get(sourceFolder(sourceId))?.pids ?? [];
  }

  /** The pids of the workflow's sandbox children, oldest first. */
  workflowPidsOf(workflowId: string): number[] {
    return this.workflowPools.get(sourceFolder(workflowId))?.pids ?? [];
  }

  /** Live sandbox children of all sources (and describes), which `maxProcesses` bounds. */
  get liveProcesses(): number {
    return this.budget.used;
  }

  /** Kills every child; in-flight invocations end with an error. Later invokes throw. */
  async close(): Promise<void> {
    this.closed = true;
    const pools = [...this.pools.values(), ...this.workflowPools.values()];
    this.pools.clear();
    this.workflowPools.clear();
    await Promise.all(pools.map((pool) => pool.close("the component host was closed")));
  }

  /**
   * The pool of source or workflow `id` in `pools`; its children read only `<dir>/<id folder>/`.
   */
  private poolFor(
    pools: Map<string, SandboxOwnerPool>,
    dir: OwnersDir,
    id: string,
    entryPath: string,
  ): SandboxOwnerPool {
    const folder = sourceFolder(id);
    let pool = pools.get(folder);
    if (!pool) {
      pool = new SandboxOwnerPool({
        entryPath,
        sourceDir: `${join(this.workDir, dir, folder)}/`,
        budget: this.budget,
        heapMb: this.heapMb,
        ...(this.tmp ? { tmp: this.tmp } : {}),
        idleMs: this.idleMs,
        blockedAfterMs: this.blockedAfterMs,
        log: this.log,
        maxProcesses: this.maxProcesses,
        // Sources come and go (and `additionalProps` runs under draft ids): no pool outlives its use.
        onEmpty: (empty) => {
          if (pools.get(folder) === empty) pools.delete(folder);
        },
      });
      pools.set(folder, pool);
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
      bundle = this.swept.then(async () => {
        await this.linkBundle(source.code, hash, outfile);
        await touch(dirname(outfile));
        return outfile;
      });
      this.bundles.set(key, bundle);
      bundle.catch(() => this.bundles.delete(key));
    }
    return bundle;
  }

  /**
   * The workflow's step modules, bundle path by code hash: each built alone exactly as a source's
   * component (once per code, in the describe folder) and hard-linked into
   * `workflows/<id>/<sha256 of the step hashes>/steps/<hash>.mjs`, the only folder its children may
   * read besides the runtime's. Cached per set of modules, so a run of an unchanged workflow costs a
   * hash and a map lookup.
   */
  private stepBundlesFor(workflow: WorkflowCode): Promise<Record<string, string>> {
    // Still the entry of its key: not removed with the workflow, nor failed, since.
    const known = this.stepBundlesOf.get(workflow);
    if (known && this.stepBundles.get(known.key) === known.bundles) return known.bundles;
    const modules = new Map<string, { code: string; file: string }>();
    for (const step of workflow.steps) modules.set(step.codeHash, { code: step.code, file: codeFolder(step) });
    const set = sha256Hex([...modules.keys()].sort().join("\n"));
    const key = `${sourceFolder(workflow.workflowId)}/${set}`;
    let bundles = this.stepBundles.get(key);
    if (!bundles) {
      const folder = join(this.workDir, WORKFLOWS_DIR, key);
      bundles = this.swept.then(async () => {
        const paths: Record<string, string> = {};
        // One at a time: esbuild is busy enough when a workflow of 50 new steps is saved.
        for (const [codeHash, { code, file }] of modules) {
          const outfile = join(folder, STEPS_DIR, `${file}.mjs`);
          await this.linkBundle(code, file, outfile);
          paths[codeHash] = outfile;
        }
        await touch(folder);
        return paths;
      });
      this.stepBundles.set(key, bundles);
      bundles.catch(() => this.stepBundles.delete(key));
    }
    this.stepBundlesOf.set(workflow, { key, bundles });
    return bundles;
  }

  /**
   * Puts the bundle of `code` (content hash `hash`) at `outfile`, its source map beside it:
   * nothing to do when they are there already (content-addressed), else built in the describe
   * folder, where the code's describe usually built them, and linked, the map first. A bundle of
   * an earlier version (its map inline, none beside) is replaced.
   */
  private async linkBundle(code: string, hash: string, outfile: string): Promise<void> {
    if (isBundled(outfile)) return;
    const built = await bundleComponent(code, join(this.workDir, DESCRIBE_DIR, hash, BUNDLE_FILE), this.plugins);
    await mkdir(dirname(outfile), { recursive: true });
    await rm(outfile, { force: true });
    await linkOrCopy(sourceMapOf(built), sourceMapOf(outfile));
    await linkOrCopy(built, outfile);
  }
}

const sandboxError = (message: string): ErrorRecord => ({ name: "SandboxError", message, ts: Date.now() });

/** Marks a bundle folder as used now: the sweep at start keeps it for the retention time. */
async function touch(folder: string): Promise<void> {
  const now = new Date();
  await utimes(folder, now, now);
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
 * Removes source and workflow bundles untouched for `retentionMs` (and their folders left empty),
 * describe bundles older than a day, and the former layout's `owners/` folder.
 */
async function sweepBundles(workDir: string, retentionMs: number): Promise<void> {
  const now = Date.now();
  await rm(join(workDir, LEGACY_OWNERS_DIR), { recursive: true, force: true });
  await removeOlderThan(join(workDir, DESCRIBE_DIR), now - DESCRIBE_RETENTION_MS);
  for (const dir of [SOURCES_DIR, WORKFLOWS_DIR]) {
    const ownersDir = join(workDir, dir);
    for (const owner of await children(ownersDir)) {
      await removeOlderThan(join(ownersDir, owner), now - retentionMs);
      // Fails unless empty, which is the point.
      await rmdir(join(ownersDir, owner)).catch(() => undefined);
    }
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
