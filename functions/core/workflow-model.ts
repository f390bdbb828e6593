/**
 * Entities of workflows (`p_`) and their runs (docs/design/workflows.md 2.1). Times are epoch
 * milliseconds, as in component-model.ts (views turn them into the spec's epoch seconds).
 */

import type { LogRecord } from "#runtime/protocol";
import type { ComponentRecord, Json, PropDescription, StoredPropValue, TimerSpec } from "./component-model.ts";

export type { LogRecord };

/**
 * A workflow. Its steps' code is not here: every step names a saved component (`sc_`), so the
 * record stays small (design W11) and the DynamoDB adapter can copy it whole into its guard items.
 */
export interface WorkflowRecord {
  id: string;
  /** The user who created it. */
  userId: string;
  /** The workspace it belongs to; members of the workspace may manage it. */
  workspaceId: string;
  projectId: string;
  name: string;
  active: boolean;
  /** `d_`: new on every change of `steps` or `triggers`. */
  deploymentId: string;
  /** Client-chosen, unique within `workspaceId` (the store refuses a second one as a conflict). */
  externalId?: string;
  /** SHA-256 of the canonical JSON of the request that last wrote the workflow, without `external_id`. */
  requestHash?: string;
  steps: StepRecord[];
  triggers: TriggerRecord[];
  createdAt: number;
  updatedAt: number;
}

/** One step of a workflow. */
export interface StepRecord {
  /** `c_`: kept across PUTs that keep the step's namespace, and with it its `$.service.db`. */
  id: string;
  namespace: string;
  /** A disabled step is kept and skipped at run time. */
  disabled: boolean;
  /** What the client gave: `component_code`, `component_id` or a registry `key`. */
  origin: "code" | "saved" | "registry";
  /** `sc_`: code and registry steps are saved as components too. */
  componentId: string;
  /** As a source's: secret props sealed. */
  configuredProps: Record<string, StoredPropValue>;
  /**
   * The final prop set when the component's `additionalProps` added props at create or PUT (static
   * props first); absent otherwise, the component's static props being the set.
   */
  propDefinitions?: PropDescription[];
}

/** The prop set a step runs with: the final set `additionalProps` made, or its component's. */
export function stepPropSet(step: StepRecord, component: ComponentRecord): PropDescription[] {
  return step.propDefinitions ?? component.metadata.props;
}

/** An HTTP trigger (`hi_`): requests to `<publicUrl>/http/<key>` start runs. */
export interface HttpTriggerRecord {
  type: "http";
  id: string;
  /** Random endpoint key, unique among every workflow's HTTP triggers. */
  key: string;
  customResponse: boolean;
  createdAt: number;
  updatedAt: number;
}

/** A timer trigger (`ti_`). */
export interface TimerTriggerRecord {
  type: "timer";
  id: string;
  spec: TimerSpec;
  /** When `spec` last changed (a PUT that keeps it keeps this too). */
  scheduleChangedAt: number;
  createdAt: number;
  updatedAt: number;
}

/** A source (`dc_`) whose events start runs, through a subscription. */
export interface SourceTriggerRecord {
  type: "source";
  sourceId: string;
  subscriptionId: string;
  /** True when the workflow deployed the source itself (it is deleted with the workflow). */
  deployedByWorkflow: boolean;
}

export type TriggerRecord = HttpTriggerRecord | TimerTriggerRecord | SourceTriggerRecord;

/** How a run ended, or `running`. */
export type WorkflowRunStatus = "running" | "success" | "exited" | "error" | "paused" | "cancelled";

/** What one step of a run did. */
export interface StepRunRecord {
  id: string;
  namespace: string;
  status: "success" | "error" | "exited" | "skipped";
  /** `$summary`. */
  summary?: string;
  durationMs: number;
  /** Bytes of what the step exported (exports never leave the sandbox, design W16). */
  exportBytes: number;
}

/** A log line of a run, naming its step. */
export interface RunLogRecord extends LogRecord {
  step: string;
}

/** One run of a workflow, kept as long as events (retention). */
export interface WorkflowRun {
  /** `run_`, sorting by time: runs are listed newest first by id. */
  id: string;
  workflowId: string;
  deploymentId: string;
  /** What started it: an HTTP trigger (`hi_`), a timer (`ti_`) or an emitter's event (its id). */
  trigger: { type: "http" | "timer" | "event"; id: string };
  status: WorkflowRunStatus;
  /** While `running`: until when its runner may still be at work; past it, another may take it over. */
  leaseUntilMs: number;
  /**
   * How many times the run was begun: 1 for the first; each take-over after a dead runner adds one.
   * `$.context.run.retry_count` is `attempts - 1`. Set by the store's `beginRun`.
   */
  attempts: number;
  startedAt: number;
  endedAt?: number;
  durationMs?: number;
  /** The trigger event, truncated to 1 KB as in event views. */
  eventPreview: Json;
  steps: StepRunRecord[];
  error?: { code: string; cellId: string; message: string };
  exitReason?: string;
  /** `paused`: how, at which step, and until when (a suspension: when it is cancelled). */
  pause?: { kind: "suspend" | "delay" | "rerun"; stepId: string; untilMs: number };
  /** A continuation: the run that paused, which this one goes on from. */
  resumedFrom?: string;
  /**
   * `cancelled`: by a request to the cancel URL, a suspension's time ran out, or the workflow was
   * made inactive after the pause was taken.
   */
  cancelReason?: "cancel_url" | "timeout" | "inactive";
  /** At most 100 lines and 32 KB per run. */
  logs: RunLogRecord[];
}
