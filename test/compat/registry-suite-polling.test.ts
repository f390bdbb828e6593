import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { registrySuite, VIAS } from "../support/registry-suite.ts";
import { startTreeServer, type TreeServer } from "../support/registry-tree.ts";
import { type StandInApi, startStandInApi } from "../support/stand-in-api.ts";

/**
 * The registry suite's polling sources (registry-suite.test.ts has the rest): timer sources of
 * the fixture tree that poll a stand-in API on 127.0.0.1 through `@pipedream/platform`'s axios
 * (test/support/stand-in-api.ts), on `common/` polling bases with `hooks.deploy` history and
 * `this.db` cursors (tasks, ESM), `dedupe: "unique"` (feed_reader, TypeScript), `this.db` seen
 * keys and `dedupe: "greatest"` (legacy_news, CommonJS), each deployed by `component_files` and by
 * `component_url`.
 *
 * Several first runs at once of such bundles once hung (a child parsing its bundle was taken for
 * blocked with nothing started, and the run moved from cold child to cold child: decisions 326
 * and 329); this file is their test under load. Its tests run at once (each on its own tenant of
 * the stand-in API): the load is the point, and one after the other they took 80 s of waiting
 * for polls.
 */
describe.concurrent("the registry suite: polling sources against local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let tree: TreeServer;
  let stand: StandInApi;
  const { componentFields, deploy, remove, events, eventsWhen } = registrySuite(() => ({ api, tree }));

  beforeAll(async () => {
    [sluice, tree, stand] = await Promise.all([startSluice(), startTreeServer(), startStandInApi()]);
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await Promise.all([sluice?.stop(), tree?.close(), stand?.close()]);
  });

  /** Waits until the stand-in API saw `polls` more requests for `tenant`, so a run that would emit has run. */
  const polledAgain = async (tenant: string, polls = 2) => {
    const seen = () => stand.requests.filter((r) => r.includes(`/t/${tenant}/`)).length;
    const before = seen();
    await eventually(() => when(seen() >= before + polls), `${polls} more polls of ${tenant}`);
  };

  for (const via of VIAS) {
    describe(`polling sources deployed by ${via}`, () => {
      it("tasks/new-task emits recent history from its deploy hook, then only new tasks on each poll", async () => {
        const tenant = `new-task-${via}`;
        stand.addTasks(tenant, "one", "two", "three", "four", "five", "six", "seven");
        const source = await deploy(via, "tasks/sources/new-task/new-task.mjs", {
          apiUrl: stand.baseUrl(tenant),
          timer: { intervalSeconds: 1 },
        });
        const history = await eventsWhen(source.id, 5, "the deploy hook's history");
        expect(history.map((e) => e.event.title)).toEqual(["three", "four", "five", "six", "seven"]);
        expect(history.map((e) => e.metadata.summary)[0]).toBe("New task: three");
        // Twelve more: the app's paginate() follows two pages of ten.
        stand.addTasks(tenant, ...Array.from({ length: 12 }, (_, i) => `later ${i + 1}`));
        const all = await eventsWhen(source.id, 17, "the new tasks");
        await polledAgain(tenant);
        const after = await events(source.id);
        expect(after.map((e) => e.event.id)).toEqual(Array.from({ length: 17 }, (_, i) => i + 3));
        expect(all.at(-1)?.event).toMatchObject({ id: 19, title: "later 12", completed: false });
        await remove(source.id);
      });

      it("tasks/new-completed-task emits each completed task once, keeping the ids it saw in this.db", async () => {
        const tenant = `completed-${via}`;
        stand.addTasks(tenant, "write", "test", "ship");
        stand.updateTask(tenant, 2, { completed: true });
        const source = await deploy(via, "tasks/sources/new-completed-task/new-completed-task.mjs", {
          apiUrl: stand.baseUrl(tenant),
          timer: { intervalSeconds: 1 },
        });
        await eventsWhen(source.id, 1, "the task completed before deploy");
        stand.updateTask(tenant, 3, { completed: true });
        await eventsWhen(source.id, 2, "the task completed after deploy");
        stand.updateTask(tenant, 2, { title: "test again" });
        await polledAgain(tenant);
        const emitted = await events(source.id);
        expect(emitted.map((e) => e.metadata.summary)).toEqual(["Completed: test", "Completed: ship"]);
        await remove(source.id);
      });

      it("tasks/task-updated emits one event per change after its deploy", async () => {
        const tenant = `updated-${via}`;
        stand.addTasks(tenant, "draft", "other");
        const source = await deploy(via, "tasks/sources/task-updated/task-updated.mjs", {
          apiUrl: stand.baseUrl(tenant),
          timer: { intervalSeconds: 1 },
        });
        await polledAgain(tenant);
        stand.updateTask(tenant, 1, { title: "final" });
        await eventsWhen(source.id, 1, "the first change");
        stand.updateTask(tenant, 1, { completed: true });
        await eventsWhen(source.id, 2, "the second change");
        await polledAgain(tenant);
        const emitted = await events(source.id);
        expect(emitted.map((e) => [e.event.title, e.event.completed])).toEqual([
          ["final", false],
          ["final", true],
        ]);
        expect(emitted[0]?.metadata.summary).toBe("Updated: final");
        await remove(source.id);
      });

      it("feed_reader/new-item-in-feed (TypeScript) emits each item once, oldest first, and its activate hook checks the URL", async () => {
        const tenant = `feed-${via}`;
        stand.tenant(tenant).feeds.news = [
          { guid: "n2", title: "Second", link: "https://x/2", pubdate: "2026-03-02T00:00:00Z" },
          { guid: "n1", title: "First", link: "https://x/1", pubdate: "2026-03-01T00:00:00Z" },
        ];
        const source = await deploy(via, "feed_reader/sources/new-item-in-feed/new-item-in-feed.ts", {
          url: `${stand.baseUrl(tenant)}/feeds/news.json`,
          timer: { intervalSeconds: 1 },
        });
        const first = await eventsWhen(source.id, 2, "the feed's items");
        expect(first.map((e) => e.metadata.summary)).toEqual(["First", "Second"]);
        stand.tenant(tenant).feeds.news?.unshift({
          guid: "n3",
          title: "Third",
          link: "https://x/3",
          pubdate: "2026-03-03T00:00:00Z",
        });
        await eventsWhen(source.id, 3, "the new item");
        await polledAgain(tenant);
        expect((await events(source.id)).map((e) => e.event.guid)).toEqual(["n1", "n2", "n3"]);

        const missing = await api("POST", "/sources", {
          ...componentFields(via, "feed_reader/sources/new-item-in-feed/new-item-in-feed.ts"),
          configured_props: { url: `${stand.baseUrl(tenant)}/feeds/none.json`, timer: { intervalSeconds: 60 } },
        });
        expect(missing.status).toBe(400);
        // The hook's error, as @pipedream/platform's axios words it: the API's own error body.
        expect(missing.json.error).toBe('the activate hook failed: {"error":"no such feed"}');
        await remove(source.id);
      });

      it("feed_reader/new-item-from-multiple-feeds (TypeScript) merges its feeds by date", async () => {
        const tenant = `feeds-${via}`;
        stand.tenant(tenant).feeds.a = [
          { guid: "a1", title: "A1", link: "https://a/1", pubdate: "2026-04-01T00:00:00Z" },
          { guid: "a2", title: "A2", link: "https://a/2", pubdate: "2026-04-03T00:00:00Z" },
        ];
        stand.tenant(tenant).feeds.b = [
          { guid: "b1", title: "B1", link: "https://b/1", pubdate: "2026-04-02T00:00:00Z" },
        ];
        const source = await deploy(
          via,
          "feed_reader/sources/new-item-from-multiple-feeds/new-item-from-multiple-feeds.ts",
          {
            urls: [`${stand.baseUrl(tenant)}/feeds/a.json`, `${stand.baseUrl(tenant)}/feeds/b.json`],
            timer: { intervalSeconds: 1 },
          },
        );
        await eventsWhen(source.id, 3, "the merged items");
        await polledAgain(tenant, 4);
        expect((await events(source.id)).map((e) => e.metadata.summary)).toEqual(["A1", "B1", "A2"]);
        await remove(source.id);
      });

      it("legacy_news/new-stories-by-keyword (CommonJS) keeps the keys it saw in this.db", async () => {
        const tenant = `stories-${via}`;
        stand.tenant(tenant).stories = [
          { objectID: "1", title: "Sluice runs registry sources", points: 10 },
          { objectID: "2", title: "Unrelated", points: 500 },
          { objectID: "3", title: "Why sluice gates matter", points: 20 },
        ];
        const source = await deploy(via, "legacy_news/sources/new-stories-by-keyword/new-stories-by-keyword.js", {
          baseUrl: stand.baseUrl(tenant),
          keyword: "sluice",
          timer: { intervalSeconds: 1 },
        });
        await eventsWhen(source.id, 2, "the matching stories");
        stand.tenant(tenant).stories.unshift({ objectID: "4", title: "Sluice 2.0", points: 1 });
        await eventsWhen(source.id, 3, "the new matching story");
        await polledAgain(tenant);
        const emitted = await events(source.id);
        expect(emitted.map((e) => e.event.objectID)).toEqual(["1", "3", "4"]);
        expect(emitted[2]?.metadata.summary).toBe("Sluice 2.0");
        await remove(source.id);
      });

      it("legacy_news/new-popular-story (CommonJS) emits only ids greater than the greatest seen", async () => {
        const tenant = `popular-${via}`;
        stand.tenant(tenant).stories = [
          { objectID: "10", title: "Big", points: 150 },
          { objectID: "11", title: "Small", points: 50 },
          { objectID: "12", title: "Bigger", points: 300 },
        ];
        const source = await deploy(via, "legacy_news/sources/new-popular-story/new-popular-story.js", {
          baseUrl: stand.baseUrl(tenant),
          minPoints: 100,
          timer: { intervalSeconds: 1 },
        });
        await eventsWhen(source.id, 2, "the popular stories");
        // An older story becoming popular stays behind the greatest id; a newer one passes.
        stand
          .tenant(tenant)
          .stories.push(
            { objectID: "9", title: "Late bloomer", points: 999 },
            { objectID: "13", title: "Newest", points: 120 },
          );
        await eventsWhen(source.id, 3, "the newer popular story");
        await polledAgain(tenant);
        const emitted = await events(source.id);
        expect(emitted.map((e) => e.metadata.summary)).toEqual([
          "Big (150 points)",
          "Bigger (300 points)",
          "Newest (120 points)",
        ]);
        await remove(source.id);
      });
    });
  }
});
