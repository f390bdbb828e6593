import { describe, expect, it } from "vitest";
import { awsDeps } from "#adapters/aws/composition";

// Until the DynamoDB workflow adapters exist (docs/design/workflows.md, build step 2; decision W1 of
// "Issue 14: workflow storage"), the AWS composition has the ports, and a use of one fails naming it.
describe("the AWS composition's workflow ports before their DynamoDB adapters", () => {
  it("builds nothing when composed, and fails naming the port when one is used", async () => {
    const deps = awsDeps({ resources: false }, {});
    await expect(async () => deps.workflows.getWorkflow("p_x")).rejects.toThrow(
      "the workflow store could not be built: the workflow store is not available on AWS yet",
    );
    await expect(async () => deps.workflowRuns.listRuns("p_x", { limit: 1 })).rejects.toThrow(
      "the workflow run store is not available on AWS yet",
    );
  });
});
