import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { route as createComponent } from "#http/create-component";
import { route as createSource } from "#http/create-source";
import { route as listSourceEvents } from "#http/list-source-events";
import { route as listUserSources } from "#http/list-user-sources";
import { apiClient } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { oversizedUpload } from "../support/oversized-upload.ts";

/** A user's HTTP source: custom response, props of several types, a secret, db and every hook. */
const WEBHOOK_SOURCE = `
export default {
  key: "e2e-webhook",
  name: "E2E Webhook",
  version: "0.1.0",
  props: {
    http: { type: "$.interface.http", customResponse: true },
    db: "$.service.db",
    greeting: { type: "string", optional: true, default: "hi" },
    limit: { type: "integer", min: 1, max: 10 },
    token: { type: "string", secret: true },
  },
  methods: {
    remember(hook) {
      this.db.set("hooks", [...(this.db.get("hooks") ?? []), hook]);
    },
  },
  hooks: {
    async deploy() { this.remember("deploy"); console.log("deploying", this.http.endpoint); },
    async activate() { this.remember("activate"); },
    async deactivate() { this.remember("deactivate"); },
  },
  async run(event) {
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    if (event.body?.fail) throw new Error("asked to fail");
    this.$emit(
      { body: event.body, method: event.method, path: event.path, component: process.env.PD_COMPONENT,
        tokenMatches: this.token === ["s3cret", "value"].join("-"), hooks: this.db.get("hooks"), limit: this.limit },
      { id: count, summary: "request " + count },
    );
    this.http.respond({ status: "201", headers: { "x-count": String(count) }, body: { count, greeting: this.greeting } });
  },
};
`;

const FIRE_AND_FORGET_SOURCE = `
module.exports = {
  name: "Fire and forget",
  version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit(event.body, { summary: "got " + event.method });
  },
};
`;

const TIMER_SOURCE = `
export default {
  name: "Every second",
  version: "0.0.1",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 1 } } },
  async run(event) {
    this.$emit({ at: event.timestamp, interval: event.interval_seconds });
  },
};
`;

describe("sources over real HTTP against local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice({ env: { SLUICE_INVOCATION_TIMEOUT_MS: "3000" } });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("saves a component with its metadata and finds it by id and by key", async () => {
    const created = await api("POST", "/components", { component_code: WEBHOOK_SOURCE });
    expect(created.status).toBe(200);
    expect(createComponent.response.safeParse(created.json).error).toBeUndefined();
    const component = created.json.data;
    expect(component.id).toMatch(/^sc_/);
    expect(component.code_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(component.name).toBe("E2E Webhook");
    expect(component.version).toBe("0.1.0");
    expect(component.created_at).toBeLessThan(1e11);
    expect(component.configurable_props.map((p: { name: string }) => p.name)).toEqual([
      "http",
      "db",
      "greeting",
      "limit",
      "token",
    ]);
    expect((await api("GET", `/components/${component.id}`)).json.data.id).toBe(component.id);
    expect((await api("GET", "/components/e2e-webhook")).json.data.id).toBe(component.id);
  });

  it("answers 400 with the loader's message and line for code that does not load", async () => {
    const broken = await api("POST", "/components", {
      component_code: "export default {\n  run() {\n    return (;\n  }\n}",
    });
    expect(broken.status).toBe(400);
    expect(broken.json.error).toMatch(/line 3/);
    const throws = await api("POST", "/components", { component_code: 'throw new Error("nope at load")' });
    expect(throws.status).toBe(400);
    expect(throws.json.error).toContain("nope at load");
    expect((await api("POST", "/components", {})).status).toBe(400);
  });

  it("serves registry components by key", async () => {
    const registry = await api("GET", "/components/registry/http-new-requests");
    expect(registry.status).toBe(200);
    expect(registry.json.data.configurable_props.some((p: { type: string }) => p.type === "$.interface.http")).toBe(
      true,
    );
    expect((await api("GET", "/components/registry/no-such-component")).status).toBe(404);
  });

  it("deploys with props, runs deploy and activate, answers on its endpoint and keeps secrets out of responses", async () => {
    const deployed = await api("POST", "/sources", {
      component_code: WEBHOOK_SOURCE,
      configured_props: { limit: 5, token: "s3cret-value" },
    });
    expect(deployed.status).toBe(200);
    expect(createSource.response.safeParse(deployed.json).error).toBeUndefined();
    const source = deployed.json.data;
    expect(source.id).toMatch(/^dc_/);
    expect(source.active).toBe(true);
    expect(source.name_slug).toBe("e2e-webhook");
    expect(source.configured_props.limit).toBe(5);
    expect(source.configured_props.db).toEqual({ type: "$.service.db" });
    expect(source.configured_props).not.toHaveProperty("token");
    const endpoint: string = source.configured_props.http.endpoint_url;
    expect(endpoint).toMatch(/\/http\/[A-Za-z0-9_-]{20,}$/);

    const answer = await fetch(`${endpoint}/hello?x=1`, {
      method: "POST",
      headers: { "content-type": "application/json", "X-Custom": "yes" },
      body: JSON.stringify({ hello: "world" }),
    });
    expect(answer.status).toBe(201);
    expect(answer.headers.get("x-count")).toBe("1");
    expect(await answer.json()).toEqual({ count: 1, greeting: "hi" });

    // The answer came from `respond`; the run's emit is stored right after it.
    const events = await eventually(async () => {
      const page = await api("GET", `/sources/${source.id}/event_summaries`);
      return page.json.data.length > 0 ? page : undefined;
    }, "the run's emit");
    expect(events.status).toBe(200);
    expect(listSourceEvents.response.safeParse(events.json).error).toBeUndefined();
    const [first] = events.json.data;
    expect(first.id).toMatch(/^\d+-\d+$/);
    expect(first.metadata).toMatchObject({ emitter_id: source.id, name: "", id: 1, summary: "request 1" });
    expect(first.event).toEqual({
      body: { hello: "world" },
      method: "POST",
      path: "/hello",
      component: source.id,
      tokenMatches: true,
      hooks: ["deploy", "activate"],
      limit: 5,
    });

    const fetched = await api("GET", `/sources/${source.id}`);
    expect(fetched.json.data).toEqual(source);
    // The secret is sealed at rest: neither the database file nor its write-ahead log holds it.
    // (The component's code spells it in two parts, since the code itself is stored.)
    for (const file of ["sluice.db", "sluice.db-wal"]) {
      const path = join(sluice.dataDir, file);
      if (existsSync(path)) expect(readFileSync(path).includes(Buffer.from("s3cret-value"))).toBe(false);
    }
  });

  it("answers 400 naming the prop for each bad prop value", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ limit: 11, token: "x" }, "configured_props.limit"],
      [{ limit: 1.5, token: "x" }, "configured_props.limit"],
      [{ limit: "3", token: "x" }, "configured_props.limit"],
      [{ token: "x" }, "configured_props.limit"],
      [{ limit: 2, token: 7 }, "configured_props.token"],
      [{ limit: 2, token: "x", nope: true }, "configured_props.nope"],
      [{ limit: 2, token: "x".repeat(70 * 1024) }, "configured_props.token"],
    ];
    for (const [props, field] of cases) {
      const answer = await api("POST", "/sources", { component_code: WEBHOOK_SOURCE, configured_props: props });
      expect(answer.status, JSON.stringify(props).slice(0, 80)).toBe(400);
      expect(answer.json.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    const action = 'export default { type: "action", name: "A", version: "1", async run() {} }';
    expect((await api("POST", "/sources", { component_code: action })).status).toBe(400);
    expect((await api("POST", "/sources", { component_id: "sc_doesnotexist00000000000" })).status).toBe(400);
    expect((await api("POST", "/sources", {})).status).toBe(400);
  });

  it("makes default names unique with a counter", async () => {
    const first = await api("POST", "/sources", { component_code: FIRE_AND_FORGET_SOURCE });
    const second = await api("POST", "/sources", { component_code: FIRE_AND_FORGET_SOURCE });
    expect(first.json.data.name_slug).toBe("fire-and-forget");
    expect(second.json.data.name_slug).toBe("fire-and-forget-1");
    expect(second.json.data.name).toBe("fire-and-forget-1");
  });

  it("answers at once without a custom response, runs in the background, and handles 404, 413 and CORS", async () => {
    const source = (await api("POST", "/sources", { component_code: FIRE_AND_FORGET_SOURCE })).json.data;
    const endpoint: string = source.configured_props.http.endpoint_url;
    const answer = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "a=1&b=two",
    });
    expect(answer.status).toBe(200);
    const emitted = await eventually(async () => {
      const events = await api("GET", `/sources/${source.id}/event_summaries`);
      return events.json.data[0];
    }, "the background run's emit");
    expect(emitted.event).toEqual({ a: "1", b: "two" });
    expect(emitted.metadata.summary).toBe("got POST");

    const preflight = await fetch(endpoint, { method: "OPTIONS" });
    expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
    expect((await fetch(`${endpoint}x`, { method: "POST" })).status).toBe(404);
    const url = new URL(endpoint);
    const huge = await oversizedUpload(url, `POST ${url.pathname} HTTP/1.1`, {
      declared: true,
      sendBytes: 1024 * 1024,
    });
    expect(huge).toMatch(/^HTTP\/1\.1 413 /);

    expect((await api("DELETE", `/sources/${source.id}`)).status).toBe(200);
    expect((await fetch(endpoint, { method: "POST" })).status).toBe(404);
    expect((await api("GET", `/sources/${source.id}`)).status).toBe(404);
  });

  it("answers 400 when a custom-response run throws before responding, and records the error", async () => {
    const source = (
      await api("POST", "/sources", { component_code: WEBHOOK_SOURCE, configured_props: { limit: 1, token: "t" } })
    ).json.data;
    const answer = await fetch(source.configured_props.http.endpoint_url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ fail: true }),
    });
    expect(answer.status).toBe(400);
    const errors = await eventually(async () => {
      const page = await api("GET", `/sources/${source.id}/event_summaries?event_name=$errors&expand=event`);
      return page.json.data[0];
    }, "the $errors event");
    expect(errors.event.error.stack).toContain("asked to fail");
    expect(errors.event.error.cellId).toBe("run");
    expect(errors.event.original_event.body).toEqual({ fail: true });
  });

  it("runs deactivate and activate in order on update and deactivate on delete", async () => {
    const source = (
      await api("POST", "/sources", { component_code: WEBHOOK_SOURCE, configured_props: { limit: 2, token: "t" } })
    ).json.data;
    const updated = await api("PUT", `/sources/${source.id}`, { configured_props: { limit: 3, token: "t2" } });
    expect(updated.status).toBe(200);
    expect(updated.json.data.configured_props.limit).toBe(3);
    const endpoint = updated.json.data.configured_props.http.endpoint_url;
    expect(endpoint).toBe(source.configured_props.http.endpoint_url);
    await fetch(endpoint, { method: "POST" });
    const latest = await eventually(async () => {
      const page = await api("GET", `/sources/${source.id}/event_summaries?expand=event`);
      return page.json.data[0];
    }, "the run's emit");
    expect(latest.event.hooks).toEqual(["deploy", "activate", "deactivate", "activate"]);

    const paused = await api("PUT", `/sources/${source.id}`, { active: false });
    expect(paused.json.data.active).toBe(false);
    const inactive = await fetch(endpoint, { method: "POST" });
    expect(inactive.headers.get("x-sluice-source-inactive")).toBe("1");
    // Only the run before the pause emitted; the inactive endpoint ran nothing.
    const emitted = (await api("GET", `/sources/${source.id}/event_summaries?event_name=`)).json.data;
    expect(emitted).toHaveLength(1);
  });

  it("keeps the configuration, the secret included, when PUT brings new code without configured_props", async () => {
    const source = (
      await api("POST", "/sources", {
        component_code: WEBHOOK_SOURCE,
        configured_props: { limit: 4, greeting: "hey", token: "s3cret-value" },
      })
    ).json.data;
    // The spec's update body: new code only, as `pd update --code` sends it.
    const newCode = WEBHOOK_SOURCE.replace('version: "0.1.0"', 'version: "0.2.0"');
    const updated = await api("PUT", `/sources/${source.id}`, { component_code: newCode });
    expect(updated.status, JSON.stringify(updated.json)).toBe(200);
    expect(updated.json.data.component_id).not.toBe(source.component_id);
    expect(updated.json.data.configured_props).toEqual(source.configured_props);
    const answer = await fetch(source.configured_props.http.endpoint_url, { method: "POST" });
    expect(await answer.json()).toMatchObject({ greeting: "hey" });
    const latest = await eventually(async () => {
      const page = await api("GET", `/sources/${source.id}/event_summaries?expand=event`);
      return page.json.data[0];
    }, "the run's emit");
    expect(latest.event).toMatchObject({ tokenMatches: true, limit: 4 });
  });

  it("fires a timer source, stops it when deactivated, and lists sources", async () => {
    const source = (await api("POST", "/sources", { component_code: TIMER_SOURCE })).json.data;
    expect(source.configured_props.timer).toEqual({ cron: null, interval_seconds: 1 });
    const fired = await eventually(async () => {
      const page = await api("GET", `/sources/${source.id}/event_summaries?event_name=`);
      return page.json.data.length >= 2 ? page.json.data : undefined;
    }, "two timer runs");
    expect(fired[0].event.interval).toBe(1);
    // Newest first: slots one second apart have distinct whole-second timestamps.
    expect(fired[0].event.at).toBeGreaterThan(fired[1].event.at);

    await api("PUT", `/sources/${source.id}`, { active: false });
    const stopped = (await api("GET", `/sources/${source.id}/event_summaries?event_name=`)).json.page_info.total_count;
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const later = (await api("GET", `/sources/${source.id}/event_summaries?event_name=`)).json.page_info.total_count;
    expect(later).toBe(stopped);

    const mine = await api("GET", "/users/me/sources?limit=2");
    expect(mine.status).toBe(200);
    expect(listUserSources.response.safeParse(mine.json).error).toBeUndefined();
    expect(mine.json.data).toHaveLength(2);
    expect(mine.json.data[0].id).toBe(source.id);
    const next = await api("GET", `/users/me/sources?limit=2&after=${mine.json.page_info.end_cursor}`);
    expect(next.json.data[0].id < mine.json.data[1].id).toBe(true);
    const workspace = (await api("GET", "/users/me")).json.data.orgs[0].id;
    const ofWorkspace = await api("GET", `/orgs/${workspace}/sources`);
    expect(ofWorkspace.json.page_info.total_count).toBe(mine.json.page_info.total_count);
  });

  it("answers 404 for sources that do not exist and 400 for malformed ids", async () => {
    expect((await api("GET", "/sources/dc_00000000000000000000aa")).status).toBe(404);
    expect((await api("PUT", "/sources/dc_00000000000000000000aa", { active: false })).status).toBe(404);
    expect((await api("DELETE", "/sources/dc_00000000000000000000aa")).status).toBe(404);
    expect((await api("GET", "/sources/nope")).status).toBe(400);
    expect((await api("GET", "/sources/dc_00000000000000000000aa/event_summaries?before=%%%")).status).toBe(400);
  });
});

describe("timers after a restart", () => {
  it("start again with the server, from the saved sources", async () => {
    const first = await startSluice();
    const key = first.apiKeyFromFile();
    const source = (await apiClient(first.baseUrl, key)("POST", "/sources", { component_code: TIMER_SOURCE })).json
      .data;
    expect(source.id).toMatch(/^dc_/);
    expect((await first.stop()).code).toBe(0);

    const restartedAt = Date.now();
    const second = await startSluice({ dataDir: first.dataDir });
    const api = apiClient(second.baseUrl, key);
    try {
      const fired = await eventually(async () => {
        const page = await api("GET", `/sources/${source.id}/event_summaries`);
        const after = page.json.data.filter((event: { indexed_at_ms: number }) => event.indexed_at_ms >= restartedAt);
        return after.length > 0 ? after : undefined;
      }, "a timer run after the restart");
      expect(fired[0].event.interval).toBe(1);
    } finally {
      await second.stop();
    }
  });
});
