/**
 * `ComponentHost` of local mode (DESIGN.md decision 3): component code runs in sandboxed child
 * processes, a small pool per owner (workspace, `sandbox-owner-pool.ts`) serving all of its
 * sources; children of different owners never share a process, and each reads only its owner's
 * bundle folder.
 *
 * Work dir layout:
 * - `runtime/sandbox-entry.mjs` the child's program, rebuilt once per Sluice process;
 * - `describe/<sha256>/component.mjs` bundles evaluated only to read metadata;
 * - `owners/<ownerId>/<sha256>/component.mjs` bundles of deployed code, content-addressed.
 *
 * Bundle folders are touched when first used by a Sluice process; at start, the host removes
 * owner bundles unused for `bundleRetentionMs` and describe bundles older than a day. A removed
 * bundle is simply rebuilt on its next invocation.
 */
import { readdir, rm, stat, utimes } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { dirname, join } from "node:path";
import type { Plugin } from "esbuild";
import type { ComponentDescription } from "#core/component-model";
import { isDomainError } from "#core/errors";
import { sha256Hex } from "#core/sha256";
import type { ComponentHost, InvokeHandlers, SourceCode } from "#ports/component-host";
import type { Invocation, InvocationResult } from "#runtime/protocol";
import { failedResult } from "#runtime/run-invocation";
import { DESCRIBE_DIR, describeComponentInSandbox } from "./component-sandbox.ts";
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
   * An owner's child is killed after this long without an invocation in flight.
   * @default 60_000
   */
  readonly idleMs?: number;
  /**
   * Healthy sandbox children per owner at most (blocked ones waiting to be killed come on top).
   * @default the number of cores, from 2 to 4 ({@link defaultSandboxProcesses})
   */
  readonly processes?: number;
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
  /**
   * Owner bundles unused for this long are removed when the host starts.
   * @default 30 days
   */
  readonly bundleRetentionMs?: number;
}

const OWNERS_DIR = "owners";
const DAY_MS = 24 * 60 * 60 * 1000;
const DESCRIBE_RETENTION_MS = DAY_MS;

/** A folder name for an owner id; ids that are not plain get a hash, never a path. */
const ownerFolder = (ownerId: string) => (/^[A-Za-z0-9_-]{1,100}$/.test(ownerId) ? ownerId : `h_${sha256Hex(ownerId)}`);
/** The bundle folder of a source's code: its `codeHash`, hashed afresh only when that is no hex digest. */
const codeFolder = (source: SourceCode) =>
  /^[0-9a-f]{64}$/.test(source.codeHash) ? source.codeHash : sha256Hex(source.code);

/** Children per owner when not configured: one per core, at least 2 (one may be blocked), at most 4. */
const defaultSandboxProcesses = () => Math.min(4, Math.max(2, availableParallelism()));

export class ProcessPoolHost implements ComponentHost {
  private readonly workDir: string;
  private readonly heapMb: number;
  private readonly idleMs: number;
  private readonly describeTimeoutMs: number;
  private readonly plugins: readonly Plugin[];
  private readonly maxProcesses: number;
  private readonly blockedAfterMs: number;
  /** The pool of each owner folder. */
  private readonly pools = new Map<string, SandboxOwnerPool>();
  /** Bundle path per `<owner folder>/<hash>`, once built or found in this process. */
  private readonly bundles = new Map<string, Promise<string>>();
  private readonly swept: Promise<void>;
  private closed = false;

  constructor(options: ProcessPoolHostOptions) {
    this.workDir = options.workDir;
    this.heapMb = options.heapMb ?? 128;
    this.idleMs = options.idleMs ?? 60_000;
    this.describeTimeoutMs = options.describeTimeoutMs ?? 5000;
    this.plugins = options.esbuildPlugins ?? [];
    this.maxProcesses = Math.max(1, Math.floor(options.processes ?? defaultSandboxProcesses()));
    this.blockedAfterMs = options.blockedAfterMs ?? DEFAULT_BLOCKED_AFTER_MS;
    this.swept = sweepBundles(this.workDir, options.bundleRetentionMs ?? 30 * DAY_MS).catch(() => undefined);
  }

  async describe(code: string): Promise<ComponentDescription> {
    // The sweep must not remove an old describe bundle this call has just found and reuses.
    await this.swept;
    return describeComponentInSandbox(code, {
      workDir: this.workDir,
      timeoutMs: this.describeTimeoutMs,
      heapMb: this.heapMb,
      esbuildPlugins: this.plugins,
    });
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
    return this.poolFor(source.ownerId, await entry).invoke(bundlePath, invocation, handlers);
  }

  /** Bundles are shared by content and age out (see the file comment): nothing to release. */
  async remove(_source: Pick<SourceCode, "sourceId" | "ownerId">): Promise<void> {}

  /** The pid of the owner's oldest sandbox child, when one runs. */
  pidOf(ownerId: string): number | undefined {
    return this.pidsOf(ownerId)[0];
  }

  /** The pids of the owner's sandbox children, oldest first. */
  pidsOf(ownerId: string): number[] {
    return this.pools.get(ownerFolder(ownerId))?.pids ?? [];
  }

  /** Kills every child; in-flight invocations end with an error. Later invokes throw. */
  async close(): Promise<void> {
    this.closed = true;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((pool) => pool.close("the component host was closed")));
  }

  private poolFor(ownerId: string, entryPath: string): SandboxOwnerPool {
    const folder = ownerFolder(ownerId);
    let pool = this.pools.get(folder);
    if (!pool) {
      pool = new SandboxOwnerPool({
        entryPath,
        ownerDir: `${join(this.workDir, OWNERS_DIR, folder)}/`,
        heapMb: this.heapMb,
        idleMs: this.idleMs,
        blockedAfterMs: this.blockedAfterMs,
        maxProcesses: this.maxProcesses,
      });
      this.pools.set(folder, pool);
    }
    return pool;
  }

  private bundleFor(source: SourceCode): Promise<string> {
    const key = `${ownerFolder(source.ownerId)}/${codeFolder(source)}`;
    let bundle = this.bundles.get(key);
    if (!bundle) {
      const outfile = join(this.workDir, OWNERS_DIR, key, BUNDLE_FILE);
      bundle = this.swept
        .then(() => bundleComponent(source.code, outfile, this.plugins))
        .then(async (path) => {
          const now = new Date();
          await utimes(dirname(path), now, now);
          return path;
        });
      this.bundles.set(key, bundle);
      bundle.catch(() => this.bundles.delete(key));
    }
    return bundle;
  }
}

/** Removes owner bundles untouched for `retentionMs` and describe bundles older than a day. */
async function sweepBundles(workDir: string, retentionMs: number): Promise<void> {
  const now = Date.now();
  await removeOlderThan(join(workDir, DESCRIBE_DIR), now - DESCRIBE_RETENTION_MS);
  const ownersDir = join(workDir, OWNERS_DIR);
  for (const owner of await children(ownersDir)) {
    await removeOlderThan(join(ownersDir, owner), now - retentionMs);
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
