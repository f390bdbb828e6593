/**
 * The components shipped with Sluice (`registry/<key>.mjs`), read by key. Adapter: `registryFiles`
 * over `readRegistryComponent` of `#adapters/registry-files`.
 */
export interface ComponentRegistry {
  /** The code of the registry component `key`, or undefined when there is none. */
  readCode(key: string): Promise<string | undefined>;
}
