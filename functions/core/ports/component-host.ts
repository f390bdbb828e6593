import type { ComponentDescription } from "#core/component-model";
import type {
  DataStoreGrant,
  DataStoreReply,
  HttpResponseSpec,
  Invocation,
  InvocationResult,
  WorkflowInvocation,
  WorkflowResult,
} from "#runtime/protocol";

/** The code of one deployed source, as a host needs it to build and run it. */
export interface SourceCode {
  sourceId: string;
  /** Workspace of the source. (Locally no two sources share a process, whatever their owner.) */
  ownerId: string;
  code: string;
  /** Hex SHA-256 of `code`; bundles are content-addressed by it. */
  codeHash: string;
}

/**
 * The code of one deployment of a workflow (docs/design/workflows.md 3.2): one module per step,
 * by code hash. Steps that share a component share a module. Disabled steps are included, so that
 * enabling one needs no new build.
 */
export interface WorkflowCode {
  workflowId: string;
  /** Workspace of the workflow. (Locally no two workflows share a process, whatever their owner.) */
  ownerId: string;
  /** `d_`: a new deployment is a new build; invocations name modules by code hash. */
  deploymentId: string;
  steps: { codeHash: string; code: string }[];
}

export interface InvokeHandlers {
  /** Called once, as soon as the code calls `respond` (before the run ends). */
  onRespond?(response: HttpResponseSpec): void;
  /**
   * Serves a `data_store` prop's call while the run goes on (`DataStoreCall`, as the sandbox sent
   * it: hostile until checked). Never rejects. Without it, the run's data store calls fail.
   */
  dataStore?(call: unknown): Promise<DataStoreReply>;
  /**
   * For a host whose runtime cannot message it while it runs (`LambdaComponentHost`): seals the
   * run's grant, sent in the invocation, with which the runtime reaches the same stores over HTTP;
   * undefined when the run could not use one (sealing is a KMS call, asked only by such a host).
   */
  dataStoreGrant?(): Promise<DataStoreGrant | undefined>;
}

/**
 * Where component code is evaluated: never in the API process. Adapters: `ProcessPoolHost`
 * (sandboxed child processes, local mode) and `LambdaComponentHost` (one Lambda function per
 * source on AWS).
 */
/** Options of {@link ComponentHost.prepare}. */
export interface PrepareOptions {
  /** Epoch ms after which `prepare` stops waiting for its code to become ready. */
  readonly readyByMs?: number;
}

export interface ComponentHost {
  /**
   * Evaluates a module in the sandbox and returns its metadata.
   * @throws DomainError `validation` on field `component_code` with the loader's message and line.
   */
  describe(code: string): Promise<ComponentDescription>;
  /**
   * Builds what `invoke` runs for a source (bundle with its npm packages; on AWS, creates or updates
   * its function). Idempotent. With `readyByMs`, a host whose code becomes ready some time after it
   * was made (a Lambda function's `Pending` state) stops waiting then and resolves `"pending"`: it
   * is made, and a later `prepare` waits for it.
   * @throws DomainError `validation` naming a package that cannot be installed.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a host whose code is ready at once resolves nothing.
  prepare(source: SourceCode, options?: PrepareOptions): Promise<void | "pending">;
  /**
   * Runs one invocation. Never throws for what the component did (errors, timeouts, crashes are in
   * `result.error`); throws only when the host itself fails.
   */
  invoke(source: SourceCode, invocation: Invocation, handlers?: InvokeHandlers): Promise<InvocationResult>;
  /** Releases what `prepare` made for the source (its function on AWS). Idempotent. */
  remove(source: Pick<SourceCode, "sourceId" | "ownerId">): Promise<void>;
  /**
   * Whether `remove` was called for the source in this host (local mode's, which then fails its
   * runs and refuses its `prepare`): a hook that failed so lost a race with the source's deletion.
   */
  wasRemoved?(sourceId: string): boolean;
  /**
   * Builds what `invokeWorkflow` runs for a workflow's deployment (every step's bundle; on AWS,
   * creates or updates its function). Idempotent.
   * @throws DomainError `validation` naming a package that cannot be installed.
   */
  prepareWorkflow(workflow: WorkflowCode): Promise<void>;
  /**
   * Runs one workflow run, every step in one invocation. Never throws for what the code did (a
   * step's error, a timeout, a crash are in the result); throws only when the host itself fails.
   */
  invokeWorkflow(
    workflow: WorkflowCode,
    invocation: WorkflowInvocation,
    handlers?: Pick<InvokeHandlers, "dataStore" | "dataStoreGrant">,
  ): Promise<WorkflowResult>;
  /** Releases what `prepareWorkflow` made (its processes locally, its function on AWS). Idempotent. */
  removeWorkflow(workflow: Pick<WorkflowCode, "workflowId" | "ownerId">): Promise<void>;
}
