import { DynamoDBDocumentClient, GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { afterAll, describe, expect, it } from "vitest";
import { buildAwsDeps } from "#adapters/aws/composition";
import { part as tables } from "#adapters/aws/parts/tables";
import { ENV } from "#config/env";
import { runningRun } from "../../support/workflow-record.ts";

const ddb = mockClient(DynamoDBDocumentClient);
afterAll(() => ddb.restore());

// The workflow ports on AWS are the DynamoDB adapters (docs/design/workflows.md, build step 2) on
// the resources table, runs kept as long as events.
describe("the AWS composition's workflow ports", () => {
  it("reads workflows from the resources table and gives runs the events' retention as TTL", async () => {
    ddb.reset();
    ddb.on(GetCommand).resolves({});
    ddb.on(UpdateCommand).resolves({ Attributes: { attempts: 1 } });
    const deps = buildAwsDeps([tables], { [ENV.resourcesTable]: "resources-x", [ENV.eventRetentionDays]: "2" });

    await expect(deps.workflows.getWorkflow("p_x")).resolves.toBeUndefined();
    expect(ddb.commandCalls(GetCommand)[0]?.args[0].input).toEqual({
      TableName: "resources-x",
      Key: { pk: "WF#p_x", sk: "WF" },
      ConsistentRead: true,
    });

    const startedAt = 1_790_000_000_000;
    const run = runningRun({ id: "run_1", workflowId: "p_x", startedAt });
    await expect(deps.workflowRuns.beginRun(run, startedAt)).resolves.toMatchObject({ outcome: "started" });
    const update = ddb.commandCalls(UpdateCommand)[0]?.args[0].input;
    expect(update?.TableName).toBe("resources-x");
    expect(update?.ExpressionAttributeNames).toMatchObject({ "#ttl": "expiresAt" });
    expect(update?.ExpressionAttributeValues).toMatchObject({ ":expiresAt": startedAt / 1000 + 2 * 86_400 });
  });
});
