/**
 * Entities of saved components, deployed sources and their events. Times are epoch milliseconds
 * (views turn them into the spec's epoch seconds).
 */
import type { ComponentDescription, PropDescription } from "#runtime/describe-component";
import type { EmitMeta, Json } from "#runtime/protocol";

export type { ComponentDescription, EmitMeta, Json, PropDescription };

/** A saved component (`sc_`): code plus the metadata read from it in the sandbox. */
export interface ComponentRecord {
  id: string;
  /** The user who saved it; `key` lookups are in this user's namespace. */
  ownerId: string;
  key?: string;
  name: string;
  version: string;
  code: string;
  /** Hex SHA-256 of `code`. */
  codeHash: string;
  /** Where the code came from, when it came from a URL (metadata only). */
  componentUrl?: string;
  metadata: ComponentDescription;
  createdAt: number;
  updatedAt: number;
}

/** A timer's configuration: exactly one of `intervalSeconds` and `cron`. */
export interface TimerSpec {
  intervalSeconds?: number;
  cron?: string;
  /** IANA zone of `cron`; UTC when absent. */
  timezone?: string;
}

/**
 * A configured prop value as stored. Secret string props are sealed by the `Secrets` port and
 * stored as `{ [SEALED_SECRET]: "<ciphertext>" }`; interface props keep their configuration
 * (timer: a `TimerSpec`; http: `{}`; db: `{}`), the runtime shapes are derived from the source.
 */
export type StoredPropValue = Json;

/** The key under which a sealed secret value is stored in `configuredProps`. */
export const SEALED_SECRET = "__sluice_sealed";

/** A deployed source (`dc_`). */
export interface SourceRecord {
  id: string;
  /** The user who deployed it. */
  userId: string;
  /** The workspace it belongs to; members of the workspace may manage it. */
  workspaceId: string;
  componentId: string;
  name: string;
  /** Slug of `name`, unique among the sources of `userId` (the store adds `-1`, `-2`, ...). */
  nameSlug: string;
  configuredProps: Record<string, StoredPropValue>;
  /**
   * The final prop set when the component's `additionalProps` added props at deploy (static props
   * merged with the dynamic ones); absent when the component's own props are the whole set.
   */
  propDefinitions?: PropDescription[];
  active: boolean;
  /** Random key of the HTTP interface endpoint, when the component has an `$.interface.http` prop. */
  endpointKey?: string;
  /** The timer of the component's `$.interface.timer` prop, when it has one. */
  timer?: TimerSpec;
  /** The workflow (`p_`) that deployed it as its trigger; its view shows it as `owner_id`. */
  workflowId?: string;
  /**
   * Set (ms, when the deploy began) from the moment the deploy saves the record until its last
   * step; a record still carrying it after a bound was left by an interrupted deploy and is
   * removed by the recovery sweep (docs/components.md "Deploys in progress").
   */
  deployingSince?: number;
  /**
   * The step a deploy left to the background (the request's time could not hold it), from which
   * the deploy finisher goes on: reads show it as `deploy_step` (docs/components.md "Deploys in
   * progress"). Absent while the request itself deploys, and once the deploy is done.
   */
  deployStep?: DeployStep;
  /**
   * Why a deploy finished in the background failed: the source stays marked (`deployingSince`),
   * reads show `deploy_state: "failed"` and this as `deploy_error`, until it is deleted or swept.
   */
  deployError?: string;
  /**
   * Set while an update (`PUT`) is in progress, beside `deployingSince`: the settings it replaces,
   * which its `deactivate()` runs with and which a `deactivate()` that fails puts back. Its
   * presence tells an update from a create to the finisher and the recovery sweep
   * (docs/components.md "Deploys in progress").
   */
  updateFrom?: SourceSettings;
  createdAt: number;
  updatedAt: number;
}

/** What an update of a source may change: the record but for its identity and deploy marks. */
export type SourceSettings = Pick<
  SourceRecord,
  "componentId" | "name" | "nameSlug" | "configuredProps" | "propDefinitions" | "active" | "endpointKey" | "timer"
>;

/** The steps of a deploy after the source is saved, in order: its function, then its hooks. */
export const DEPLOY_STEPS = ["prepare", "deploy", "activate"] as const;
/**
 * The steps of an update after its source is marked: the previous settings' `deactivate()` (and
 * their timer stopped), the new code's function, then the new settings' `activate()`.
 */
export const UPDATE_STEPS = ["deactivate", "prepare", "activate"] as const;
/**
 * A deploy's or an update's step, or `delete`: a deletion whose `deactivate()` the deploy finisher
 * runs before it removes the source (reads show `deploy_state: "deleting"`, no `deploy_step`).
 */
export type DeployStep = (typeof DEPLOY_STEPS)[number] | (typeof UPDATE_STEPS)[number] | "delete";
/** Every step a create or an update may be at (a read's `deploy_step`). */
export const ANY_DEPLOY_STEP = ["prepare", "deploy", "activate", "deactivate"] as const satisfies readonly DeployStep[];
/** What a record's `deployStep` may hold. */
const STORED_DEPLOY_STEPS: readonly string[] = [...ANY_DEPLOY_STEP, "delete"] satisfies readonly DeployStep[];
export const isDeployStep = (value: string): value is DeployStep => STORED_DEPLOY_STEPS.includes(value);

/** Dedupe memory of a source (component-model.md "Events"). */
export interface DedupeState {
  /** `unique`: the last 100 ids, oldest first, as strings. */
  unique?: string[];
  /** `greatest`: the largest id emitted so far. */
  greatest?: string | number;
  /** `last`: the id of the last emitted event. */
  last?: string | number;
}

/** What a source keeps between runs, versioned for optimistic concurrency. */
export interface SourceState {
  db: Record<string, Json>;
  dedupe: DedupeState;
  /** 0 for a source with no stored state yet. */
  version: number;
}

/** Reserved channels besides the default (`""`) and custom ones. */
export const LOGS_CHANNEL = "$logs";
export const ERRORS_CHANNEL = "$errors";

/** An event's metadata as stored: what `$emit` gave, and what trusted code adds to it. */
export interface EventMeta extends EmitMeta {
  /**
   * Webhook deliveries that led to the run that stored the event (`#core/delivery-loops`); set
   * only by trusted code, absent for none. Never shown in a view.
   */
  hops?: number;
}

/** An event to store; the store assigns its id. */
export interface NewEvent {
  /** `""` for the default channel, a custom name, `$logs` or `$errors`. */
  channel: string;
  event: Json;
  /** Unique id of this emit (`emit_id`), made by trusted code. */
  emitId: string;
  meta: EventMeta;
  /**
   * `JSON.stringify(event)`, when the caller made it already (a run's emits are measured against
   * the limits that way): a store writes it instead of serialising the event again.
   */
  eventJson?: string;
}

/** A stored event. `id` is `<epoch_ms>-<n>`, strictly increasing per source in (ms, n) order. */
export interface StoredEvent {
  sourceId: string;
  id: string;
  indexedAtMs: number;
  channel: string;
  event: Json;
  emitId: string;
  meta: EventMeta;
}
