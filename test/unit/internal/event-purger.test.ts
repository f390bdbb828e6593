import { describe, expect, it } from "vitest";
import type { Deps } from "#core/ports/deps";
import { jsonLogger } from "#core/ports/logger";
import { createEventPurgerHandler } from "#internal/event-purger";
import { memoryDeps } from "../../support/memory-deps.ts";

const SOURCE = "dc_01kab00000abcdefghjkmn";
const WORKFLOW = "p_01kab00000abcdefghjkmn";

function setup(purge: (sourceId: string) => Promise<void>) {
  const lines: Record<string, unknown>[] = [];
  const base = memoryDeps();
  const purged: string[] = [];
  const deps: Deps = {
    ...base,
    events: {
      appendEvents: base.events.appendEvents.bind(base.events),
      listEvents: base.events.listEvents.bind(base.events),
      deleteEvents: base.events.deleteEvents.bind(base.events),
      deleteAllEvents: base.events.deleteAllEvents.bind(base.events),
      purgeDeletedEvents: async (sourceId) => {
        purged.push(sourceId);
        await purge(sourceId);
      },
    },
    log: jsonLogger({}, (line) => lines.push(JSON.parse(line))),
  };
  return { handler: createEventPurgerHandler(async () => deps), purged, lines };
}

describe("the event purger function", () => {
  it("purges the deleted events of the source it is given", async () => {
    const { handler, purged, lines } = setup(async () => {});
    await handler({ sourceId: SOURCE });
    expect(purged).toEqual([SOURCE]);
    expect(lines).toEqual([]);
  });

  it("purges the events of a deleted workflow (its emitter id is a p_)", async () => {
    const { handler, purged, lines } = setup(async () => {});
    await handler({ sourceId: WORKFLOW });
    expect(purged).toEqual([WORKFLOW]);
    expect(lines).toEqual([]);
  });

  it("drops, with an error in the log, an event that is not a purge job", async () => {
    const { handler, purged, lines } = setup(async () => {});
    await expect(handler({ sourceId: "wh_not_an_emitter" })).resolves.toBeUndefined();
    await expect(handler({})).resolves.toBeUndefined();
    expect(purged).toEqual([]);
    expect(lines).toMatchObject([
      { level: "error", message: "malformed event purge dropped" },
      { level: "error", message: "malformed event purge dropped" },
    ]);
  });

  it("fails when the purge fails, so that Lambda retries it", async () => {
    const { handler } = setup(async () => {
      throw new Error("ProvisionedThroughputExceededException");
    });
    await expect(handler({ sourceId: SOURCE })).rejects.toThrow("ProvisionedThroughputExceededException");
  });

  it("really removes what a deletion hid, with the local store behind it", async () => {
    const deps = memoryDeps();
    const stored = await deps.events.appendEvents(
      SOURCE,
      [0, 1, 2].map((n) => ({ channel: "", event: { n }, emitId: `e${n}`, meta: {} })),
      deps.clock.nowMs(),
    );
    await deps.events.deleteEvents(SOURCE, { fromId: stored[0]!.id, toId: stored[1]!.id });
    const handler = createEventPurgerHandler(async () => deps);
    await handler({ sourceId: SOURCE });
    // Idempotent: a retry or a duplicate delivery does no harm.
    await handler({ sourceId: SOURCE });
    const page = await deps.events.listEvents(SOURCE, { limit: 10 });
    expect(page.items.map((event) => event.id)).toEqual([stored[2]!.id]);
  });
});
