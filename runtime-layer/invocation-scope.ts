/**
 * Process-wide hooks that route what component code does through globals (console output,
 * `process.env.PD_COMPONENT`, errors nobody catches) to the invocation it belongs to. One process
 * may run several invocations at once (a local sandbox child runs many runs of its source), so the
 * current invocation is found with AsyncLocalStorage, which follows timers, promises and callbacks
 * started inside it.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { format } from "node:util";
import type { LogLevel } from "./protocol.ts";

/** What the process-wide hooks need of the running invocation. */
export interface InvocationScope {
  readonly invocationId: string;
  readonly sourceId: string;
  /** True once the invocation has returned: late callbacks of its code change nothing any more. */
  readonly closed: boolean;
  log(level: LogLevel, message: string): void;
  /** Ends the invocation with what its code threw where nobody could catch it. */
  fail(thrown: unknown): void;
}

// Kept on globalThis so that two copies of this module (two bundles in one process) share one
// store and patch console and process.env once.
const STORAGE = Symbol.for("sluice.runtime.invocation-scope");
const INSTALLED = Symbol.for("sluice.runtime.process-hooks");
type SluiceGlobals = { [STORAGE]?: AsyncLocalStorage<InvocationScope>; [INSTALLED]?: true };
const globals = globalThis as typeof globalThis & SluiceGlobals;
globals[STORAGE] ??= new AsyncLocalStorage<InvocationScope>();
const storage = globals[STORAGE];

/** The console methods routed to an invocation's logs, which are also the levels of its log records. */
export const LOG_LEVELS = ["log", "info", "warn", "error", "debug"] as const satisfies readonly LogLevel[];
const PD_COMPONENT = "PD_COMPONENT";

/** Runs `fn` (and everything it starts) as part of `scope`'s invocation. */
export function runInScope<T>(scope: InvocationScope, fn: () => T): T {
  installProcessHooks();
  return storage.run(scope, fn);
}

/**
 * Ends the current invocation with `thrown` (an uncaught exception or unhandled rejection of its
 * code). Returns false when no open invocation is current, so the caller decides what to do.
 */
export function failCurrentInvocation(thrown: unknown): boolean {
  const scope = storage.getStore();
  if (!scope || scope.closed) return false;
  scope.fail(thrown);
  return true;
}

/** The id of the invocation whose code is running now (also after it returned), if any. */
export function currentInvocationId(): string | undefined {
  return storage.getStore()?.invocationId;
}

/**
 * Patches `console` and replaces `process.env` with a proxy, once per process. Outside any
 * invocation both behave as before (console writes where it always wrote).
 */
function installProcessHooks(): void {
  if (globals[INSTALLED]) return;
  globals[INSTALLED] = true;
  const methods = console as unknown as Record<LogLevel, (...args: unknown[]) => void>;
  for (const level of LOG_LEVELS) {
    const original = methods[level].bind(console);
    methods[level] = (...args: unknown[]) => {
      const scope = storage.getStore();
      if (!scope) {
        original(...args);
        return;
      }
      // A finished invocation's late timers log nowhere: its logs were returned already.
      if (!scope.closed) scope.log(level, format(...args));
    };
  }
  process.env = currentSourceEnv(process.env);
}

/**
 * `process.env` whose `PD_COMPONENT` is the current invocation's source id. `Object.defineProperty`
 * with a getter is refused on Node's env object, hence a proxy. The component cannot change its
 * own id: writes and deletes of `PD_COMPONENT` inside an invocation are ignored.
 */
function currentSourceEnv(target: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const sourceId = (key: string | symbol) => (key === PD_COMPONENT ? storage.getStore()?.sourceId : undefined);
  return new Proxy(target, {
    get(env, key) {
      return sourceId(key) ?? Reflect.get(env, key);
    },
    set(env, key, value) {
      if (sourceId(key) !== undefined) return true;
      // Plain assignment, not Reflect.set with the proxy as receiver: Node's env object coerces
      // values to strings only on direct assignment.
      (env as Record<string | symbol, unknown>)[key] = value;
      return true;
    },
    has(env, key) {
      return sourceId(key) !== undefined || Reflect.has(env, key);
    },
    deleteProperty(env, key) {
      return sourceId(key) !== undefined || Reflect.deleteProperty(env, key);
    },
    ownKeys(env) {
      const keys = Reflect.ownKeys(env);
      return sourceId(PD_COMPONENT) !== undefined && !keys.includes(PD_COMPONENT) ? [...keys, PD_COMPONENT] : keys;
    },
    getOwnPropertyDescriptor(env, key) {
      const value = sourceId(key);
      if (value === undefined) return Reflect.getOwnPropertyDescriptor(env, key);
      return { value, writable: true, enumerable: true, configurable: true };
    },
  });
}
