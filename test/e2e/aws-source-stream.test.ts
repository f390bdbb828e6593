/**
 * The AWS stream function (`functions/stream/source-stream-lambda.ts`) run in this process against
 * the DynamoDB adapters on DynamoDB Local, writing to a real Node Writable the way Lambda's
 * response stream receives it: history after Last-Event-ID, events appended while it polls,
 * keepalives, a clean end before the function's (injected) time runs out, the reconnection that
 * follows, deletions, and the errors answered before streaming.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { documentClient } from "#adapters/aws/composition";
import { DynamoDbEventStore } from "#adapters/aws/dynamodb-event-store";
import { DynamoDbIdentityStore } from "#adapters/aws/dynamodb-identity-store";
import { DynamoDbSourceStore } from "#adapters/aws/dynamodb-source-store";
import { ENV } from "#config/env";
import { type CreatedAccount, createAccount } from "#core/accounts";
import type { SourceRecord, StoredEvent } from "#core/component-model";
import { SSE_OPENING_FRAME } from "#core/source-stream";
import { createEventPurgerHandler } from "#internal/event-purger";
import { systemClock } from "#ports/clock";
import type { Deps } from "#ports/deps";
import { randomIdGenerator } from "#ports/id-generator";
import { silentLogger } from "#ports/logger";
import {
  createSourceStreamHandler,
  type ResponseMetadata,
  type StreamDeps,
} from "../../functions/stream/source-stream-lambda.ts";
import { ESM_REQUIRE_BANNER } from "../../lib/constructs/sluice-function.ts";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { REPO_ROOT } from "../support/local-process.ts";

const END_MARGIN_MS = 1_000;

async function until(condition: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function client() {
  const chunks: string[] = [];
  const out = new Writable({
    write(chunk, _encoding, callback) {
      chunks.push(String(chunk));
      callback();
    },
  });
  return { out, text: () => chunks.join("") };
}

interface Frame {
  id?: string;
  event?: string;
  data?: Record<string, any>;
  comment?: string;
}

function frames(text: string): Frame[] {
  return text
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => {
      const frame: Frame = {};
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) frame.comment = line.slice(1);
        else if (line.startsWith("id: ")) frame.id = line.slice(4);
        else if (line.startsWith("event: ")) frame.event = line.slice(7);
        else if (line.startsWith("data: ")) frame.data = JSON.parse(line.slice(6));
      }
      return frame;
    });
}

const eventFrames = (text: string) => frames(text).filter((frame) => frame.id !== undefined);

/** A Lambda context whose remaining time the test can cut short. */
function lambdaContext(windowMs: number) {
  let end = Date.now() + windowMs;
  return {
    awsRequestId: "lambda-req",
    getRemainingTimeInMillis: () => end - Date.now(),
    /** The function now has `ms` left. */
    cutTo(ms: number) {
      end = Date.now() + ms;
    },
  };
}

function request(sourceId: string, headers: Record<string, string>) {
  return {
    version: "2.0",
    rawPath: `/sources/${sourceId}/sse`,
    rawQueryString: "",
    headers,
    requestContext: { requestId: "url-req", http: { method: "GET" } },
  };
}

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
    deps = { identity, sources, events: new DynamoDbEventStore(documents, table), log: silentLogger };
    const accountDeps = { identity, clock: systemClock, ids: randomIdGenerator(systemClock) };
    alice = await createAccount(accountDeps, { username: "alice", email: "alice@example.com" });
    bob = await createAccount(accountDeps, { username: "bob", email: "bob@example.com" });
    const now = Date.now();
    const source: SourceRecord = {
      id: accountDeps.ids.newId("source"),
      userId: alice.user.id,
      workspaceId: alice.workspace.id,
      componentId: accountDeps.ids.newId("component"),
      name: "feed",
      nameSlug: "feed",
      configuredProps: {},
      active: true,
      createdAt: now,
      updatedAt: now,
    };
    sourceId = (await sources.createSource(source)).id;
  });

  afterAll(() => dynamodb.destroy());

  it("streams the history after Last-Event-ID, then events appended while it polls, keepalives, and ends before the timeout; a reconnection resumes exactly", async () => {
    const history = await emit("", 1, 2, 3);
    const first = client();
    const context = lambdaContext(120_000);
    const done = handler()(
      request(sourceId, { authorization: `Bearer ${alice.apiKey}`, "last-event-id": history[0]!.id }),
      first.out,
      context,
    );
    await until(() => eventFrames(first.text()).length === 2, "the history after Last-Event-ID");
    await emit("", 4);
    await emit("$logs", 100);
    await emit("alerts", 5);
    await until(() => eventFrames(first.text()).length === 4, "the events appended while polling");
    const keepalives = () => frames(first.text()).filter((frame) => frame.comment === "keepalive").length;
    await until(() => keepalives() > 0, "a keepalive");

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
    const sent = eventFrames(first.text());
    expect(sent.map((frame) => frame.data?.e)).toEqual([{ n: 2 }, { n: 3 }, { n: 4 }, { n: 5 }]);
    expect(sent.map((frame) => frame.event)).toEqual([undefined, undefined, undefined, "alerts"]);
    expect(sent[0]).toMatchObject({
      id: history[1]!.id,
      data: { id: history[1]!.id, metadata: { emitter_id: sourceId } },
    });

    // Events stored while the client was away arrive on reconnection, exactly once.
    const missed = await emit("", 6, 7);
    const second = client();
    const again = lambdaContext(120_000);
    const reconnected = handler()(
      request(sourceId, { authorization: `Bearer ${alice.apiKey}`, "last-event-id": sent.at(-1)!.id! }),
      second.out,
      again,
    );
    await until(() => eventFrames(second.text()).length === 2, "the missed events");
    again.cutTo(END_MARGIN_MS + 200);
    await reconnected;
    expect(eventFrames(second.text()).map((frame) => frame.id)).toEqual(missed.map((event) => event.id));
  });

  it("never streams deleted events, before or after the purger removed them", async () => {
    const [a, b, c] = await emit("", 10, 11, 12);
    // The stream resumes just before the range: after the event that precedes it, if any.
    const previous = await deps.events.listEvents(sourceId, { limit: 1, after: a!.id });
    const cursor = previous.items[0]?.id ?? "0-0";
    await deps.events.deleteEvents(sourceId, { fromId: a!.id, toId: b!.id });
    const streamAfter = async (lastEventId: string) => {
      const { out, text } = client();
      const context = lambdaContext(120_000);
      const done = handler()(
        request(sourceId, { authorization: `Bearer ${alice.apiKey}`, "last-event-id": lastEventId }),
        out,
        context,
      );
      await until(() => eventFrames(text()).some((frame) => frame.id === c!.id), "the event after the range");
      context.cutTo(END_MARGIN_MS + 200);
      await done;
      return eventFrames(text()).map((frame) => frame.data?.e.n);
    };
    expect(await streamAfter(cursor)).toEqual([12]);
    const purge = createEventPurgerHandler(async () => deps as unknown as Deps);
    await purge({ sourceId });
    await purge({ sourceId });
    expect(await streamAfter(cursor)).toEqual([12]);
  });

  it("answers 404 for another account's source and 401 without a key, before streaming", async () => {
    const theirs = client();
    await handler()(request(sourceId, { authorization: `Bearer ${bob.apiKey}` }), theirs.out, lambdaContext(60_000));
    expect(responses.at(-1)?.statusCode).toBe(404);
    expect(JSON.parse(theirs.text())).toEqual({ error: expect.stringMatching(/not found/) });

    const anonymous = client();
    await handler()(request(sourceId, {}), anonymous.out, lambdaContext(60_000));
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
    const outfile = join(outdir, "source-stream-lambda.mjs");
    await build({
      entryPoints: [join(REPO_ROOT, "functions", "stream", "source-stream-lambda.ts")],
      outfile,
      bundle: true,
      platform: "node",
      target: "node22",
      format: "esm",
      external: ["@aws-sdk/*"],
      banner: { js: ESM_REQUIRE_BANNER },
      logLevel: "silent",
    });
    const metadata: unknown[] = [];
    const streamified: unknown[] = [];
    (globalThis as { awslambda?: unknown }).awslambda = {
      streamifyResponse: (inner: unknown) => {
        streamified.push(inner);
        return inner;
      },
      HttpResponseStream: {
        from: (stream: Writable, meta: unknown) => {
          metadata.push(meta);
          return stream;
        },
      },
    };
    // What the stack sets on the stream function (and the Lambda runtime, for the SDK).
    Object.assign(process.env, {
      [ENV.resourcesTable]: table,
      AWS_ENDPOINT_URL_DYNAMODB: endpoint,
      AWS_REGION: "local",
      AWS_ACCESS_KEY_ID: "local",
      AWS_SECRET_ACCESS_KEY: "local",
    });
    try {
      const { handler } = await import(pathToFileURL(outfile).href);
      expect(streamified).toEqual([handler]);
      const [stored] = await emit("", 42);
      const { out, text } = client();
      const context = lambdaContext(120_000);
      const done = handler(
        request(sourceId, { authorization: `Bearer ${alice.apiKey}`, "last-event-id": "0-0" }),
        out,
        context,
      );
      await until(() => eventFrames(text()).some((frame) => frame.id === stored!.id), "the event, from the bundle");
      // The default end margin is 5 s.
      context.cutTo(5_000 + 300);
      await done;
      expect(metadata).toEqual([
        { statusCode: 200, headers: expect.objectContaining({ "content-type": "text/event-stream; charset=utf-8" }) },
      ]);
      expect(out.writableFinished).toBe(true);
    } finally {
      delete (globalThis as { awslambda?: unknown }).awslambda;
    }
  });
});
