/**
 * The AWS stream function (`functions/internal/source-stream-function.ts`) run in this process against
 * the DynamoDB adapters on DynamoDB Local, writing to a real Node Writable the way Lambda's
 * response stream receives it: history after Last-Event-ID, events appended while it polls,
 * keepalives, a clean end before the function's (injected) time runs out, the reconnection that
 * follows, deletions, and the errors answered before streaming.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbEventStore } from "#adapters/aws/dynamodb-event-store";
import { DynamoDbIdentityStore } from "#adapters/aws/dynamodb-identity-store";
import { DynamoDbSourceStore } from "#adapters/aws/dynamodb-source-store";
import { DynamoDbWorkflowStore } from "#adapters/aws/dynamodb-workflow-store";
import { type CreatedAccount, createAccount } from "#core/accounts";
import type { StoredEvent } from "#core/component-model";
import { systemClock } from "#core/ports/clock";
import type { Deps } from "#core/ports/deps";
import { randomIdGenerator } from "#core/ports/id-generator";
import { silentLogger } from "#core/ports/logger";
import { SSE_OPENING_FRAME } from "#core/source-stream";
import { createEventPurgerHandler } from "#internal/event-purger";
import {
  createSourceStreamHandler,
  type ResponseMetadata,
  type StreamDeps,
} from "../../functions/internal/source-stream-function.ts";
import { bundleLambdaFiles } from "../../lib/constructs/esbuild-code.ts";
import { createResourcesTable, lambdaEnvFor, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { eventually, when } from "../support/eventually.ts";
import { REPO_ROOT } from "../support/local-process.ts";
import { sourceRecord } from "../support/source-record.ts";
import { dataOf } from "../support/sse-client.ts";
import { fakeLambdaRuntime, functionUrlRequest, lambdaContext, recordedResponse } from "../support/stream-function.ts";

const END_MARGIN_MS = 1_000;

describe("the AWS stream function on DynamoDB Local", () => {
  const endpoint = inject("dynamodbEndpoint");
  const dynamodb = localDynamoDbClient(endpoint);
  const documents = documentClient(dynamodb);
  let deps: StreamDeps;
  let alice: CreatedAccount;
  let bob: CreatedAccount;
  let sourceId: string;
  let tick = 0;
  const responses: ResponseMetadata[] = [];

  const handler = () =>
    createSourceStreamHandler({
      loadDeps: async () => deps,
      settings: () => ({ pollIntervalMs: 50, endMarginMs: END_MARGIN_MS }),
      keepaliveMs: 300,
      responseStream: (stream, metadata) => {
        responses.push(metadata);
        return stream;
      },
    });

  /** A request of alice's, resuming after `lastEventId`. */
  const resuming = (lastEventId: string) =>
    functionUrlRequest(`/sources/${sourceId}/sse`, {
      authorization: `Bearer ${alice.apiKey}`,
      "last-event-id": lastEventId,
    });

  const emit = (channel: string, ...values: number[]): Promise<StoredEvent[]> =>
    deps.events.appendEvents(
      sourceId,
      values.map((n) => ({ channel, event: { n }, emitId: `emit-${++tick}`, meta: {} })),
      Date.now(),
    );

  let table: string;

  beforeAll(async () => {
    table = await createResourcesTable(endpoint, `stream-${process.pid}-${Date.now()}`);
    const identity = new DynamoDbIdentityStore(documents, table);
    const sources = new DynamoDbSourceStore(documents, table);
    deps = {
      identity,
      sources,
      workflows: new DynamoDbWorkflowStore(documents, table),
      events: new DynamoDbEventStore(documents, table),
      log: silentLogger,
    };
    const accountDeps = { identity, clock: systemClock, ids: randomIdGenerator(systemClock) };
    alice = await createAccount(accountDeps, { username: "alice", email: "alice@example.com" });
    bob = await createAccount(accountDeps, { username: "bob", email: "bob@example.com" });
    sourceId = (await sources.createSource(sourceRecord(alice, accountDeps.ids.newId("source"), Date.now()))).id;
  });

  afterAll(() => dynamodb.destroy());

  it("streams the history after Last-Event-ID, then events appended while it polls, keepalives, and ends before the timeout; a reconnection resumes exactly", async () => {
    const history = await emit("", 1, 2, 3);
    const first = recordedResponse();
    const context = lambdaContext(120_000);
    const done = handler()(resuming(history[0]!.id), first.out, context);
    await eventually(() => when(first.messages.length === 2), "the history after Last-Event-ID");
    await emit("", 4);
    await emit("$logs", 100);
    await emit("alerts", 5);
    await eventually(() => when(first.messages.length === 4), "the events appended while polling");
    await eventually(() => when(first.comments.includes("keepalive")), "a keepalive");

    // The function is about to time out: the response ends cleanly, before it does.
    context.cutTo(END_MARGIN_MS + 500);
    await done;
    expect(first.out.writableFinished).toBe(true);
    expect(context.getRemainingTimeInMillis()).toBeGreaterThan(0);
    expect(responses.at(-1)).toMatchObject({
      statusCode: 200,
      headers: { "content-type": "text/event-stream; charset=utf-8" },
    });
    expect(first.text().startsWith(SSE_OPENING_FRAME)).toBe(true);
    const sent = first.messages;
    expect(dataOf(sent).map((data) => data.e)).toEqual([{ n: 2 }, { n: 3 }, { n: 4 }, { n: 5 }]);
    expect(sent.map((message) => message.event)).toEqual([undefined, undefined, undefined, "alerts"]);
    expect(sent[0]?.id).toBe(history[1]!.id);
    expect(dataOf(sent)[0]).toMatchObject({ id: history[1]!.id, metadata: { emitter_id: sourceId } });

    // Events stored while the client was away arrive on reconnection, exactly once.
    const missed = await emit("", 6, 7);
    const second = recordedResponse();
    const again = lambdaContext(120_000);
    const reconnected = handler()(resuming(sent.at(-1)!.id!), second.out, again);
    await eventually(() => when(second.messages.length === 2), "the missed events");
    again.cutTo(END_MARGIN_MS + 200);
    await reconnected;
    expect(second.messages.map((message) => message.id)).toEqual(missed.map((event) => event.id));
  });

  it("never streams deleted events, before or after the purger removed them", async () => {
    const [a, b, c] = await emit("", 10, 11, 12);
    // The stream resumes just before the range: after the event that precedes it, if any.
    const previous = await deps.events.listEvents(sourceId, { limit: 1, after: a!.id });
    const cursor = previous.items[0]?.id ?? "0-0";
    await deps.events.deleteEvents(sourceId, { fromId: a!.id, toId: b!.id });
    const streamAfter = async (lastEventId: string) => {
      const { out, messages } = recordedResponse();
      const context = lambdaContext(120_000);
      const done = handler()(resuming(lastEventId), out, context);
      await eventually(() => when(messages.some((message) => message.id === c!.id)), "the event after the range");
      context.cutTo(END_MARGIN_MS + 200);
      await done;
      return dataOf(messages).map((data) => data.e.n);
    };
    expect(await streamAfter(cursor)).toEqual([12]);
    const purge = createEventPurgerHandler(async () => deps as unknown as Deps);
    await purge({ sourceId });
    await purge({ sourceId });
    expect(await streamAfter(cursor)).toEqual([12]);
  });

  it("answers 404 for another account's source and 401 without a key, before streaming", async () => {
    const theirs = recordedResponse();
    await handler()(
      functionUrlRequest(`/sources/${sourceId}/sse`, { authorization: `Bearer ${bob.apiKey}` }),
      theirs.out,
      lambdaContext(60_000),
    );
    expect(responses.at(-1)?.statusCode).toBe(404);
    expect(JSON.parse(theirs.text())).toEqual({ error: expect.stringMatching(/not found/) });

    const anonymous = recordedResponse();
    await handler()(functionUrlRequest(`/sources/${sourceId}/sse`, {}), anonymous.out, lambdaContext(60_000));
    expect(responses.at(-1)).toMatchObject({
      statusCode: 401,
      headers: { "www-authenticate": 'Bearer realm="sluice"' },
    });
    expect(JSON.parse(anonymous.text())).toEqual({ error: expect.any(String) });
  });

  it("runs from its esbuild bundle in Lambda's way: streamifyResponse, HttpResponseStream.from and the AWS composition", async () => {
    // Bundled as the service stack bundles it, and loaded with the globals of Lambda's Node.js runtime.
    const outdir = join(REPO_ROOT, "node_modules", ".cache", "sluice-test-bundles", String(process.pid));
    mkdirSync(outdir, { recursive: true });
    bundleLambdaFiles({ "source-stream-function.mjs": "functions/internal/source-stream-function.ts" }, outdir, {
      external: ["@aws-sdk/*"],
    });
    const runtime = fakeLambdaRuntime();
    const env = lambdaEnvFor(table, endpoint);
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
    try {
      const { handler } = await import(pathToFileURL(join(outdir, "source-stream-function.mjs")).href);
      expect(runtime.streamified).toEqual([handler]);
      const [stored] = await emit("", 42);
      const { out, messages } = recordedResponse();
      const context = lambdaContext(120_000);
      const done = handler(resuming("0-0"), out, context);
      await eventually(() => when(messages.some((message) => message.id === stored!.id)), "the event, from the bundle");
      // The default end margin is 5 s.
      context.cutTo(5_000 + 300);
      await done;
      expect(runtime.metadata).toEqual([
        { statusCode: 200, headers: expect.objectContaining({ "content-type": "text/event-stream; charset=utf-8" }) },
      ]);
      expect(out.writableFinished).toBe(true);
    } finally {
      runtime.remove();
      vi.unstubAllEnvs();
    }
  });
});
