/**
 * The globals component code may use without importing them. In the original's Node.js code steps
 * `defineComponent` is a runtime global (real-behaviour.md, `@pipedream/types`): a plain code step
 * is `export default defineComponent({ async run({ steps, $ }) { ... } })` with no import. The
 * identity helpers of `@pipedream/types` (`defineApp`, `defineSource`, `defineAction`) are
 * installed beside it, so a component written against the types loads without its dependency.
 *
 * Installed before any component module is evaluated: by both entries as they start (describe
 * children too, so a code step describes as it runs), and again by `runWorkflowSteps`.
 */

const IDENTITY_HELPERS = ["defineComponent", "defineAction", "defineSource", "defineApp"] as const;

/** Each helper returns its argument unchanged, as the original's do. */
const identity = <T>(component: T): T => component;

/**
 * Puts the helpers on `globalThis` where they are missing. A helper the process already has (one
 * the component code set itself) is kept.
 */
export function installComponentGlobals(): void {
  const target = globalThis as Record<string, unknown>;
  for (const name of IDENTITY_HELPERS) {
    if (typeof target[name] === "function") continue;
    Object.defineProperty(target, name, { value: identity, writable: true, configurable: true, enumerable: false });
  }
}
