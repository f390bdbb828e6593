/**
 * The components and workflow templates shipped with Sluice (a components tree in the public
 * registry's layout, `registry/components/<app>/sources/<name>/<name>.mjs`, with any registry
 * directory the operator adds, and `registry/templates/<tch_id>.json`), read by key or id. Adapter: `registryFiles` of
 * `#adapters/registry-files`.
 */
export interface ComponentRegistry {
  /** The code of the registry component `key`, or undefined when there is none. */
  readCode(key: string): Promise<string | undefined>;
  /** The JSON text of the workflow template `id` (`tch_…`), or undefined when there is none. */
  readTemplate(id: string): Promise<string | undefined>;
}
