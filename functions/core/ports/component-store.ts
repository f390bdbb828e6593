import type { ComponentRecord } from "#core/component-model";

/**
 * Saved components (`sc_`). Adapters: `SqliteComponentStore`, `DynamoDbComponentStore`; both pass
 * `test/contract/component-store.contract.ts`.
 */
export interface ComponentStore {
  /** Saves a new component. Throws `conflict` when the id exists. */
  putComponent(component: ComponentRecord): Promise<void>;
  getComponent(id: string): Promise<ComponentRecord | undefined>;
  /** The newest component of `ownerId` whose code declares `key`. */
  findComponentByKey(ownerId: string, key: string): Promise<ComponentRecord | undefined>;
}
