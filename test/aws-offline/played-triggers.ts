/**
 * What moto stores but does not run, played from what the stack deployed into it:
 *
 * - **EventBridge rules' Lambda targets** (moto's `PutEvents` delivers to queues and log groups
 *   only): each rule of the buses keeps its pattern, and its targets are moved to a tap queue; what
 *   moto's own matching sends there is invoked on the rule's original targets, asynchronously, as
 *   EventBridge does.
 * - **SQS event source mappings** (moto runs them in Docker): each mapping is disabled in moto and
 *   polled here instead, with its batch size, and its function invoked with the SQS event; the
 *   messages of a batch are deleted when the function succeeds, but those it reports in
 *   `batchItemFailures` (they come back after the queue's visibility timeout, as on Lambda).
 *
 * A rule, target or mapping missing from the template is missing here too.
 */
import {
  EventBridgeClient,
  ListRulesCommand,
  ListTargetsByRuleCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import { LambdaClient, ListEventSourceMappingsCommand, UpdateEventSourceMappingCommand } from "@aws-sdk/client-lambda";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  type Message,
  ReceiveMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import type { LocalLambda } from "./local-lambda.ts";
import { MOTO_CREDENTIALS, MOTO_REGION } from "./moto.ts";

interface PlayedMapping {
  queueUrl: string;
  queueArn: string;
  functionArn: string;
  batchSize: number;
}

export interface PlayedTriggers {
  /** The rules' targets by rule, and the mappings, as found in moto. */
  readonly rules: ReadonlyMap<string, readonly string[]>;
  readonly mappings: readonly PlayedMapping[];
  /** Every event moto's matching sent on to the rules' targets, as EventBridge hands it to them. */
  readonly published: readonly Record<string, unknown>[];
  close(): Promise<void>;
}

const POLL_MS = 200;

export async function playTriggers(
  moto: string,
  lambda: LocalLambda,
  busNames: readonly string[],
): Promise<PlayedTriggers> {
  const options = { endpoint: moto, region: MOTO_REGION, credentials: MOTO_CREDENTIALS };
  const events = new EventBridgeClient(options);
  const sqs = new SQSClient(options);
  const lambdaApi = new LambdaClient(options);

  const { QueueUrl: tapUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "offline-harness-rule-tap" }));
  const tap = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: tapUrl, AttributeNames: ["QueueArn"] }));
  const rules = new Map<string, string[]>();
  for (const bus of busNames) {
    const { Rules = [] } = await events.send(new ListRulesCommand({ EventBusName: bus }));
    for (const [index, rule] of Rules.entries()) {
      const { Targets = [] } = await events.send(new ListTargetsByRuleCommand({ Rule: rule.Name, EventBusName: bus }));
      const arns = Targets.map((target) => target.Arn ?? "");
      rules.set(`${bus}/${rule.Name}`, arns);
      await events.send(
        new RemoveTargetsCommand({ Rule: rule.Name, EventBusName: bus, Ids: Targets.map((t) => t.Id ?? "") }),
      );
      await events.send(
        new PutTargetsCommand({
          Rule: rule.Name,
          EventBusName: bus,
          Targets: [{ Id: `tap-${index}`, Arn: tap.Attributes?.QueueArn }],
        }),
      );
    }
  }

  const { EventSourceMappings = [] } = await lambdaApi.send(new ListEventSourceMappingsCommand({}));
  const mappings: PlayedMapping[] = [];
  for (const mapping of EventSourceMappings) {
    await lambdaApi.send(new UpdateEventSourceMappingCommand({ UUID: mapping.UUID, Enabled: false }));
    const queueName = mapping.EventSourceArn?.split(":").at(-1) ?? "";
    const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: queueName }));
    mappings.push({
      queueUrl: QueueUrl ?? "",
      queueArn: mapping.EventSourceArn ?? "",
      functionArn: mapping.FunctionArn ?? "",
      batchSize: mapping.BatchSize ?? 10,
    });
  }

  const receive = async (queueUrl: string, max: number): Promise<Message[]> =>
    (
      await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: Math.min(max, 10),
          MessageSystemAttributeNames: ["All"],
          MessageAttributeNames: ["All"],
        }),
      )
    ).Messages ?? [];

  const deliverTapped = async () => {
    for (const message of await receive(tapUrl ?? "", 10)) {
      const event = JSON.parse(message.Body ?? "{}");
      published.push(event);
      // Every rule sends to the one tap, so an event goes to the targets of every rule: right
      // while the stack has one rule (the test asserts it), as moto sent the event for it.
      for (const arns of rules.values()) {
        for (const arn of arns) lambda.invokeAsync(arn.split(":").at(-1) ?? arn, event);
      }
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: tapUrl,
          Entries: [{ Id: "0", ReceiptHandle: message.ReceiptHandle }],
        }),
      );
    }
  };

  const pollMapping = async (mapping: PlayedMapping) => {
    const messages = await receive(mapping.queueUrl, mapping.batchSize);
    if (messages.length === 0) return;
    const Records = messages.map((message) => ({
      messageId: message.MessageId,
      receiptHandle: message.ReceiptHandle,
      body: message.Body,
      attributes: message.Attributes ?? {},
      messageAttributes: message.MessageAttributes ?? {},
      md5OfBody: message.MD5OfBody,
      eventSource: "aws:sqs",
      eventSourceARN: mapping.queueArn,
      awsRegion: MOTO_REGION,
    }));
    const { result, functionError } = await lambda.invoke(mapping.functionArn.split(":").at(-1) ?? "", { Records });
    if (functionError) return;
    const failed = new Set(
      ((result as { batchItemFailures?: { itemIdentifier: string }[] } | null)?.batchItemFailures ?? []).map(
        (failure) => failure.itemIdentifier,
      ),
    );
    const done = messages.filter((message) => !failed.has(message.MessageId ?? ""));
    if (done.length === 0) return;
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: mapping.queueUrl,
        Entries: done.map((message, index) => ({ Id: String(index), ReceiptHandle: message.ReceiptHandle })),
      }),
    );
  };

  const published: Record<string, unknown>[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await Promise.all([deliverTapped(), ...mappings.map(pollMapping)]).catch(() => {});
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  })();

  return {
    rules,
    mappings,
    published,
    async close() {
      stopped = true;
      await loop;
      for (const client of [events, sqs, lambdaApi]) client.destroy();
    },
  };
}
