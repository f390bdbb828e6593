import { describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteDeliveryQueue } from "#adapters/local/sqlite-delivery-queue";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import { SqliteIdentityStore } from "#adapters/local/sqlite-identity-store";
import { storageErrorTranslator, storageFailureOf, translatingErrors } from "#adapters/local/storage-errors";
import { createAccount } from "#core/accounts";
import { systemClock } from "#core/ports/clock";
import { randomIdGenerator } from "#core/ports/id-generator";
import { route as createWebhook } from "#http/create-webhook";
import { createHttpHandler, type HttpEvent } from "#http/pipeline";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { recordingLogger } from "../../support/recording-logger.ts";

const ids = randomIdGenerator(systemClock);
const newAccount = (username: string) => ({ username, email: `${username}@example.com` });

describe("storageFailureOf", () => {
  it("recognises a full, read-only or failing data dir by its error code, and nothing else", () => {
    const coded = (code: string) => Object.assign(new Error(code), { code });
    expect(storageFailureOf(coded("SQLITE_FULL"))).toBe("the server's disk is full");
    expect(storageFailureOf(coded("ENOSPC"))).toBe("the server's disk is full");
    expect(storageFailureOf(coded("SQLITE_READONLY_DBMOVED"))).toBe("the server's data is read-only");
    expect(storageFailureOf(coded("EROFS"))).toBe("the server's data is read-only");
    expect(storageFailureOf(coded("SQLITE_IOERR_WRITE"))).toContain("I/O error");
    expect(storageFailureOf(coded("SQLITE_CONSTRAINT_UNIQUE"))).toBeUndefined();
    expect(storageFailureOf(coded("SQLITE_FULLNESS"))).toBeUndefined();
    expect(storageFailureOf(new Error("no code"))).toBeUndefined();
  });
});

describe("translatingErrors", () => {
  it("turns a read-only data dir into a 503-coded error naming no path, logged once with the data dir", async () => {
    const db = openSqlite(":memory:");
    const errors: Record<string, unknown>[] = [];
    const translate = storageErrorTranslator("/srv/sluice-data", recordingLogger(errors));
    const identity = translatingErrors(new SqliteIdentityStore(db), "identity", translate);
    const deps = { identity, clock: systemClock, ids };
    await createAccount(deps, newAccount("first"));
    db.pragma("query_only = ON");
    const refused = createAccount(deps, newAccount("second"));
    await expect(refused).rejects.toMatchObject({
      name: "DomainError",
      code: "unavailable",
      message: "the server's data is read-only: the request was not stored; try again later",
    });
    await expect(createAccount(deps, newAccount("third"))).rejects.toMatchObject({ code: "unavailable" });
    expect(errors).toEqual([
      expect.objectContaining({ data_dir: "/srv/sluice-data", code: "SQLITE_READONLY", operation: expect.any(String) }),
    ]);
    // Reads go on, and other errors pass through as they were.
    db.pragma("query_only = OFF");
    expect(await identity.findUserByUsername("first")).toMatchObject({ username: "first" });
    await expect(createAccount(deps, newAccount("first"))).rejects.toMatchObject({ code: "conflict" });
  });

  it("turns a full data file into a 503-coded error, for synchronous methods too", async () => {
    const db = openSqlite(":memory:");
    const translate = storageErrorTranslator(":memory:", recordingLogger());
    const events = translatingErrors(new SqliteEventStore(db), "events", translate);
    const deliveries = translatingErrors(new SqliteDeliveryQueue(db), "deliveries", translate);
    db.pragma(`max_page_count = ${db.pragma("page_count", { simple: true })}`);
    const big = { channel: "", event: "x".repeat(64 * 1024), emitId: "e", meta: {} };
    await expect(events.appendEvents("dc_1", [big], 1)).rejects.toMatchObject({
      code: "unavailable",
      message: expect.stringContaining("the server's disk is full"),
    });
    const delivery = {
      id: "dlv_1",
      target: { kind: "webhook", webhookId: "wh_1" },
      payload: "x".repeat(64 * 1024),
      nextAttemptAt: 1,
      attempts: 0,
    } as never;
    await expect(deliveries.enqueue([delivery])).rejects.toMatchObject({ code: "unavailable" });
    // What the port's own members give reads through to it.
    expect(deliveries.leaseMs).toBe(60_000);
  });
});

describe("an API request while the data dir is read-only", () => {
  it("answers 503 with a message saying why, and the request id", async () => {
    const deps = memoryDeps();
    const account = await accountIn(deps, "ada");
    deps.subscriptions = translatingErrors(
      deps.subscriptions,
      "subscriptions",
      storageErrorTranslator("/data", recordingLogger()),
    );
    deps.sqlite.pragma("query_only = ON");
    const handler = createHttpHandler(createWebhook, async () => deps);
    const event = {
      version: "2.0",
      routeKey: "POST /v1/webhooks",
      rawPath: "/v1/webhooks",
      rawQueryString: "url=https%3A%2F%2Fexample.com%2Fhook",
      headers: { authorization: `Bearer ${account.apiKey}` },
      queryStringParameters: { url: "https://example.com/hook" },
      requestContext: { requestId: "req-1" },
      isBase64Encoded: false,
    } as unknown as HttpEvent;
    const result = await handler(event, { awsRequestId: "req-1" } as never);
    expect(result.statusCode).toBe(503);
    expect(JSON.parse(result.body)).toEqual({
      error: "the server's data is read-only: the request was not stored; try again later",
    });
    expect(result.headers["x-request-id"]).toBe("req-1");
  });
});
