import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { postJson as post, registrySuite, VIAS } from "../support/registry-suite.ts";
import { startTreeServer, type TreeServer } from "../support/registry-tree.ts";
import { type StandInApi, startStandInApi } from "../support/stand-in-api.ts";

/**
 * The registry suite's components that need what the issue15-runtime branch is building:
 * `http_request` props with `execute()`, delayed emits (`delivery_ts`) and a source without `run`.
 * The fixtures are in the same tree (test/fixtures/registry-tree/components/) (docs/decisions.md, 330).
 */
describe("the registry suite: http_request props, delayed emits, a source without run", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let tree: TreeServer;
  let stand: StandInApi;
  const { deploy, events, eventsWhen, stepOf, runWorkflow } = registrySuite(() => ({ api, tree }));

  beforeAll(async () => {
    [sluice, tree, stand] = await Promise.all([startSluice(), startTreeServer(), startStandInApi()]);
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await Promise.all([sluice?.stop(), tree?.close(), stand?.close()]);
  });

  for (const via of VIAS) {
    describe(`brought by ${via}`, () => {
      it("tasks/send-raw-request executes its http_request prop against the stand-in API", async () => {
        const tenant = `raw-${via}`;
        stand.addTasks(tenant, "listed");
        const { run, steps } = await runWorkflow([
          await stepOf(via, "raw", "tasks/actions/send-raw-request/send-raw-request.mjs", {
            httpRequest: { method: "GET", url: `${stand.baseUrl(tenant)}/tasks/1` },
          }),
        ]);
        expect(run.status, JSON.stringify(run.error)).toBe("success");
        expect(steps?.raw).toMatchObject({
          $return_value: { id: 1, title: "listed" },
          $summary: "The API answered 200",
        });
      });

      it("tasks/schedule-task-reminder's delayed emit waits on $in, then is emitted", async () => {
        const source = await deploy(via, "tasks/sources/schedule-task-reminder/schedule-task-reminder.mjs");
        const answer = await post(source.endpoint, { taskId: 7, inSeconds: 2 });
        expect(answer.status).toBe(202);
        const pending = await eventually(async () => {
          const found = await events(source.id, "&event_name=$in");
          return when(found.length === 1) && found;
        }, "the pending emit");
        expect(pending[0]?.event).toEqual({ taskId: 7 });
        expect(await events(source.id)).toEqual([]);
        const [delivered] = await eventsWhen(source.id, 1, "the delayed emit");
        expect(delivered?.event).toEqual({ taskId: 7 });
        expect(delivered?.metadata.summary).toBe("Reminder for task 7");
      });

      it("clock/every-interval, a source without run, emits its timer's event on each tick", async () => {
        const source = await deploy(via, "clock/sources/every-interval/every-interval.mjs", {
          timer: { intervalSeconds: 1 },
        });
        const ticks = await eventsWhen(source.id, 2, "the ticks");
        expect(ticks[0]?.event).toHaveProperty("timestamp");
        await api("DELETE", `/sources/${source.id}`);
      });
    });
  }
});
