/**
 * The flow both AWS suites drive through a deployed Sluice (docs/aws.md): a user made in the
 * stack's table by `sluice create-user --table`, a source deployed by its route, a webhook
 * subscribed to it, an HTTP event sent to the source's endpoint, the event read back by the list
 * route and delivered to the receiver. `npm run test:aws` drives it against the stacks deployed
 * into moto (test/aws-offline/), `npm run test:aws-live` against a real account (test/aws-live/);
 * each adds the checks only its side can make.
 */
import { expect } from "vitest";
import { apiClient } from "./api-client.ts";
import { eventually } from "./eventually.ts";
import { runSluice } from "./local-process.ts";
import { type ReceivedRequest, UID_EMITTER, type WebhookReceiver } from "./webhook-receiver.ts";

/** Where `sluice create-user --table` writes: the stack's table, in a region, at an endpoint (moto's) or AWS's. */
export interface StackTable {
  readonly table: string;
  /** Default: the AWS configuration's region. */
  readonly region?: string;
  /** Default: AWS's own endpoint. */
  readonly endpoint?: string;
  /** Credentials and settings for the command beyond the test's environment. */
  readonly env?: Record<string, string>;
}

/** A user made by `sluice create-user --table` in the stack's table, as an operator does. */
export async function createUserInTable(
  where: StackTable,
  username: string,
): Promise<{ user_id: string; api_key: string }> {
  const options = [
    ...["--table", where.table],
    ...(where.region ? ["--region", where.region] : []),
    ...(where.endpoint ? ["--endpoint", where.endpoint] : []),
  ];
  const { stdout } = await runSluice(
    ["create-user", ...options, "--username", username, "--email", `${username}@example.com`],
    where.env,
  );
  return JSON.parse(stdout) as { user_id: string; api_key: string };
}

export interface FlowTarget {
  /** The REST API's base URL, ending in `/v1` (the `ApiUrl` output). */
  readonly apiUrl: string;
  /** An API key of a user of the deployment. */
  readonly apiKey: string;
  /** The receiver the deliveries are expected at. */
  readonly receiver: WebhookReceiver;
  /** The receiver's URL as the webhook deliverer reaches it (a public URL on AWS). */
  readonly receiverUrl: string;
  /** How long the event may take to be stored, and then delivered. */
  readonly timeoutMs: number;
  /** Added to a failing expectation's message: what the functions logged, where the test can see it. */
  readonly diagnostics?: () => string;
}

export interface FlowResult {
  readonly sourceId: string;
  readonly endpoint: string;
  readonly webhookId: string;
  /** The id of the event the HTTP request became. */
  readonly eventId: string;
  /** The webhook delivery of that event, as the receiver got it. */
  readonly delivered: ReceivedRequest;
}

/**
 * Deploys a source, subscribes a webhook to it, sends it an HTTP event and waits for the event in
 * the source's history and at the receiver. Fails at the first step that does not happen.
 */
export async function sourceToWebhookFlow(target: FlowTarget): Promise<FlowResult> {
  const api = apiClient(target.apiUrl, target.apiKey);
  const more = () => (target.diagnostics ? `\n${target.diagnostics()}` : "");

  const deployed = await api("POST", "/sources", { component_code: UID_EMITTER });
  expect(deployed.status, `${JSON.stringify(deployed.json)}${more()}`).toBe(200);
  const sourceId = deployed.json.data.id as string;
  const endpoint = deployed.json.data.configured_props.http.endpoint_url as string;
  // The endpoint is on the API's own host: `<API URL without /v1>/http/<key>`.
  expect(endpoint).toBe(`${target.apiUrl.replace(/\/v1$/, "")}/http/${endpoint.split("/").at(-1)}`);

  const created = await api("POST", `/webhooks?url=${encodeURIComponent(target.receiverUrl)}&name=flow`);
  expect(created.status, JSON.stringify(created.json)).toBe(200);
  const webhookId = created.json.data.id as string;
  const subscribed = await api("POST", `/subscriptions?emitter_id=${sourceId}&listener_id=${webhookId}`);
  expect(subscribed.status, JSON.stringify(subscribed.json)).toBe(200);

  const n = Math.floor(Math.random() * 1_000_000);
  const sent = await fetch(endpoint, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ uid: `flow-${n}`, n }),
  });
  expect(sent.status, more()).toBe(200);

  // Stored in the table, and read back by the list route.
  const poll = { timeoutMs: target.timeoutMs, intervalMs: 500 };
  const summaries = await eventually(
    async () => {
      const answer = await api("GET", `/sources/${sourceId}/event_summaries`);
      return answer.json?.data?.length > 0 ? answer.json.data : undefined;
    },
    `the event in the source's history${more()}`,
    poll,
  );
  expect(summaries).toMatchObject([{ event: { n } }]);
  const eventId = summaries[0].id as string;

  // Published on the bus, matched by the stack's rule, dispatched, queued and delivered.
  const delivered = await eventually(
    () => target.receiver.delivered.find((request) => request.headers["x-sluice-event-id"] === eventId),
    `the delivery of ${eventId}${more()}`,
    poll,
  );
  expect(JSON.parse(delivered.body)).toMatchObject({ event: { n } });
  return { sourceId, endpoint, webhookId, eventId, delivered };
}
