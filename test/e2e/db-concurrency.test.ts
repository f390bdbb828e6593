import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

const HTTP_DB_EXAMPLE = readFileSync(new URL("../fixtures/components/http-db-example.js", import.meta.url), "utf8");

/** Issue 12, item 9: `$.service.db` under concurrent runs, end to end against the real server. */
describe("a $.service.db counter under concurrent requests", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("gives N concurrent requests N distinct counts, in its answers and in its events", async () => {
    const created = await api("POST", "/sources", { component_code: HTTP_DB_EXAMPLE });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const endpoint = created.json.data.configured_props.http.endpoint_url as string;
    const n = 20;
    const answers = await Promise.all(
      Array.from({ length: n }, async (_, index) => {
        const answer = await fetch(endpoint, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ index }),
        });
        return { status: answer.status, body: (await answer.json()) as { requestCount: number } };
      }),
    );
    const counts = Array.from({ length: n }, (_, index) => index + 1);
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
    expect(answers.map((answer) => answer.body.requestCount).sort((a, b) => a - b)).toEqual(counts);
    const events = await api("GET", `/sources/${created.json.data.id}/event_summaries?limit=100`);
    const summaries = events.json.data.map((event: { metadata: { summary: string } }) => event.metadata.summary);
    expect(summaries.sort((a: string, b: string) => Number(a.split(" ")[1]) - Number(b.split(" ")[1]))).toEqual(
      counts.map((count) => `Request ${count}`),
    );
  });
});
