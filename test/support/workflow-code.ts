/**
 * A workflow as a `ComponentHost` gets it (`WorkflowCode`) and one run of it
 * (`WorkflowInvocation`), built from the code of its steps, for host tests (contract and
 * integration). Steps are named `s1`, `s2`, ... (`c_s1` as their id) in order.
 */
import type { WorkflowCode } from "#core/ports/component-host";
import { sha256Hex } from "#core/sha256";
import type { WorkflowInvocation, WorkflowLimits } from "#runtime/protocol";

export const WORKFLOW_TEST_LIMITS: WorkflowLimits = {
  maxEmits: 10,
  maxEmitBytes: 100_000,
  maxSends: 10,
  maxSendBytes: 100_000,
  maxExportBytes: 8 * 1024 * 1024,
};

/** Workflow `workflowId` whose steps run `codes`, in order (steps with the same code share a module). */
export function workflowCode(workflowId: string, codes: readonly string[], ownerId = "o_owner"): WorkflowCode {
  return {
    workflowId,
    ownerId,
    deploymentId: `d_${sha256Hex(codes.join("\n")).slice(0, 8)}`,
    steps: codes.map((code) => ({ code, codeHash: sha256Hex(code) })),
  };
}

let runs = 0;

/** A run of every step of `workflow`, triggered by `event`. */
export function workflowRun(
  workflow: WorkflowCode,
  event: unknown = {},
  overrides: Partial<WorkflowInvocation> = {},
): WorkflowInvocation {
  runs += 1;
  return {
    invocationId: `wf_run_${process.pid}_${runs}`,
    kind: "workflow",
    workflowId: workflow.workflowId,
    trigger: { event: event as WorkflowInvocation["trigger"]["event"], context: { id: `run_${runs}` } },
    context: { id: `run_${runs}`, workflow_id: workflow.workflowId },
    steps: workflow.steps.map((step, index) => ({
      id: `c_s${index + 1}`,
      namespace: `s${index + 1}`,
      module: step.codeHash,
      props: {},
      propTypes: {},
      db: {},
    })),
    respondable: false,
    timeoutMs: 10_000,
    limits: WORKFLOW_TEST_LIMITS,
    ...overrides,
  };
}
