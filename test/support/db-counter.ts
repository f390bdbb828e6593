import { setTimeout as sleep } from "node:timers/promises";
import type { IncomingHttpRequest } from "#core/http-run-event";
import type { Deps } from "#core/ports/deps";
import { receiveHttpRequest } from "#core/source-endpoint";
import { runSource } from "#core/source-runs";
import { deploySource } from "#core/sources";
import { accountIn, memoryDeps, scriptedHost } from "./memory-deps.ts";

/** A POST of `{}` to a source's endpoint, as `receiveHttpRequest` takes it. */
export const EMPTY_POST: IncomingHttpRequest = {
  method: "POST",
  path: "/",
  rawQuery: "",
  headers: {},
  body: Buffer.from("{}"),
  clientIp: "",
  url: "",
};

/** The endpoint key of a source view (the last segment of its `endpoint_url`). */
export const endpointKeyOf = (source: { configured_props: Record<string, unknown> }) =>
  String((source.configured_props.http as { endpoint_url: string }).endpoint_url)
    .split("/")
    .at(-1) as string;

/**
 * The registry's `http-db-example.js` counter, run through the use cases with a scripted host: each
 * run reads `requestCount` from its db snapshot, yields for a few milliseconds (so runs overlap),
 * then writes and emits the count plus one. Starts `n` runs at once, half as custom-response
 * requests and half as queued runs, and returns the emitted counts in ascending order: 1 to n when
 * runs of the source never build on the same snapshot.
 */
export async function countConcurrentRuns(n: number, ports: Partial<Pick<Deps, "runLock" | "sources">> = {}) {
  const { host } = scriptedHost(
    {
      props: [
        { name: "http", type: "$.interface.http", customResponse: true },
        { name: "db", type: "$.service.db" },
      ],
    },
    async (invocation) => {
      const requestCount = Number(invocation.db.requestCount ?? 0) + 1;
      await sleep(1 + Math.floor(Math.random() * 10));
      return {
        dbWrites: { requestCount },
        emits: [{ event: { requestCount }, meta: {} }],
        response: { status: 200, headers: {}, body: JSON.stringify({ requestCount }) },
      };
    },
  );
  const deps = memoryDeps(Date.now(), { host, ...(ports.runLock ? { runLock: ports.runLock } : {}) });
  if (ports.sources) deps.sources = ports.sources;
  const account = await accountIn(deps, "counter");
  const source = await deploySource(deps, { userId: account.user.id }, { component_code: "counter" });
  const endpointKey = endpointKeyOf(source);
  await Promise.all(
    Array.from({ length: n }, (_, index) =>
      index % 2 === 0
        ? receiveHttpRequest(deps, endpointKey, EMPTY_POST)
        : runSource(deps, { sourceId: source.id, trigger: "http", event: {} }),
    ),
  );
  const emitted = await deps.events.listEvents(source.id, { limit: 100, channel: "" });
  return emitted.items.map((event) => (event.event as { requestCount: number }).requestCount).sort((a, b) => a - b);
}
