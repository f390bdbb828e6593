/**
 * `npm run test:aws-live` (docs/aws.md, "The live test"): the offline test's flow
 * (test/support/aws-flow.ts) against a real account where the stacks are deployed: a user made
 * in the real table, a source deployed by the real route function, an HTTP event through the
 * real API Gateway, stored, published on the real bus and delivered through the real queues to
 * a receiver on this machine, reached through the public URL the user gives. Skipped without
 * credentials (run.ts says so before vitest starts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { createUserInTable, type FlowResult, sourceToWebhookFlow } from "../support/aws-flow.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";
import { type Deployment, findDeployment } from "./deployment.ts";
import { liveConfig } from "./live-config.ts";

const config = liveConfig(process.env);
const settings = config.kind === "ready" ? config.settings : undefined;
const title =
  config.kind === "ready"
    ? `Sluice deployed as ${config.settings.serviceStack}, driven live`
    : `Sluice on a real account (skipped: ${config.kind === "skip" ? config.reason : config.problems.join("; ")})`;

describe.skipIf(settings === undefined)(title, () => {
  let deployment: Deployment;
  let receiver: WebhookReceiver;
  let apiKey: string;
  let flow: FlowResult | undefined;

  beforeAll(async () => {
    if (!settings) return;
    deployment = await findDeployment(settings.serviceStack, settings.region);
    receiver = await WebhookReceiver.start(settings.receiverPort);
    // A user of its own per run; it stays in the table (docs/aws.md says how to remove it).
    apiKey = (await createUserInTable({ table: deployment.table, region: settings.region }, `live-${Date.now()}`))
      .api_key;
  }, 120_000);

  afterAll(async () => {
    // The source's function and the webhook are removed; the user and its events stay.
    if (flow) {
      const api = apiClient(deployment.apiUrl, apiKey);
      await api("DELETE", `/sources/${flow.sourceId}`);
      await api("DELETE", `/webhooks/${flow.webhookId}`);
    }
    await receiver?.stop();
  }, 60_000);

  it("deploys a source by its route, and delivers an HTTP event to a subscribed webhook through the table, the bus and the queues", async () => {
    if (!settings) return;
    flow = await sourceToWebhookFlow({
      apiUrl: deployment.apiUrl,
      apiKey,
      receiver,
      receiverUrl: settings.receiverUrl,
      // Real cold starts, EventBridge and SQS: slower than the emulator's path.
      timeoutMs: 120_000,
    });
    expect(flow.delivered.headers["x-sluice-delivery-id"]).toMatch(/^dlv_/);
  }, 300_000);
});
