import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * Issue 12, item 16: no answer and no stored event carries an absolute path of the server, and a
 * failure of code fetched from `component_url` names `component_url`.
 */
const BROKEN = "export default {\n  name: 'x',\n  props: {,\n};\n";
const THROWS_AT_LOAD = 'const ok = 1;\nthrow new Error("nope at load");\nexport default { name: "x" };\n';
/** Reads a file next to its own bundle: Node's error names the bundle's folder. */
const READS_ITS_FOLDER = `import { readFileSync } from "node:fs";
readFileSync(new URL("./settings.json", import.meta.url));
export default { name: "x" };
`;
/** Throws on line 9 of its own code; logs a stack and its own URL (both paths of the server). */
const FAILING_RUN = `// a comment line
interface Event { body?: { route?: string } }
export default {
  name: "Fails",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event: Event) {
    console.log(new Error("logged").stack, import.meta.url, "route", event.body?.route);
    throw new Error("failed in " + import.meta.url);
  },
};
`;

describe("error messages and stored errors carry no path of the server", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let codeServer: Server;
  let codeUrl: (name: string) => string;
  const served: Record<string, string> = { broken: BROKEN, throws: THROWS_AT_LOAD, reads: READS_ITS_FOLDER };

  beforeAll(async () => {
    codeServer = createServer((request, response) => {
      const code = served[(request.url ?? "/").slice(1)];
      response.writeHead(code === undefined ? 404 : 200, { "content-type": "text/javascript" });
      response.end(code ?? "");
    });
    await new Promise<void>((resolve) => codeServer.listen(0, "127.0.0.1", resolve));
    const { port } = codeServer.address() as AddressInfo;
    codeUrl = (name) => `http://127.0.0.1:${port}/${name}`;
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });

  afterAll(async () => {
    await sluice?.stop();
    await new Promise((resolve) => codeServer?.close(resolve));
  });

  /** The answer holds no path of the data dir, in any form. */
  function expectNoServerPath(text: string) {
    expect(text).not.toContain(sluice.dataDir);
    expect(text).not.toContain("file://");
  }

  it("names component_url when the code fetched from it does not compile or load", async () => {
    for (const endpoint of ["/components", "/sources"]) {
      const broken = await api("POST", endpoint, { component_url: codeUrl("broken") });
      expect(broken.status).toBe(400);
      expect(broken.json.error).toMatch(/^component_url: .+\(line 3, column \d+\)$/);
      expect(broken.json.details).toEqual([{ field: "component_url", message: expect.stringContaining("line 3") }]);
      const throws = await api("POST", endpoint, { component_url: codeUrl("throws") });
      expect(throws.json.error).toMatch(/^component_url: .*nope at load.*line 2/);
    }
    // Code given alongside the URL is what was deployed: its failure stays on component_code.
    const both = await api("POST", "/components", { component_code: BROKEN, component_url: codeUrl("throws") });
    expect(both.json.error).toMatch(/^component_code: /);
  });

  it("says which file a load failure is about without the folder it is in", async () => {
    const answer = await api("POST", "/components", { component_code: READS_ITS_FOLDER });
    expect(answer.status).toBe(400);
    expect(answer.json.error).toContain("settings.json");
    expectNoServerPath(JSON.stringify(answer.json));
  });

  it("answers a hook that fails without the paths its message names", async () => {
    const code = `export default {
      name: "hook",
      props: {},
      hooks: { async deploy() { throw new Error("cannot deploy " + import.meta.url); } },
      async run() {},
    };`;
    const answer = await api("POST", "/sources", { component_code: code });
    expect(answer.status).toBe(400);
    expect(answer.json.error).toBe("the deploy hook failed: cannot deploy component.mjs");
    expectNoServerPath(JSON.stringify(answer.json));
  });

  it("stores a run's error and logs with the user's file and line, and no path of the server", async () => {
    const source = (await api("POST", "/sources", { component_code: FAILING_RUN })).json.data;
    await fetch(source.configured_props.http.endpoint_url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ route: "/api/users" }),
    });
    const [failure] = await eventually(async () => {
      const page = await api("GET", `/sources/${source.id}/event_summaries?event_name=$errors&expand=event`);
      return page.json.data.length > 0 ? page.json.data : undefined;
    }, "the run's error");
    const { error } = failure.event;
    expect(error.message).toBe("failed in component.mjs");
    expect(error.stack).toMatch(/component\.ts:9:\d+/);
    expect(failure.metadata.summary).toBe("Error: failed in component.mjs");
    expectNoServerPath(JSON.stringify(failure));

    const logs = (await api("GET", `/sources/${source.id}/event_summaries?event_name=$logs&expand=event`)).json.data;
    const line = logs.map((log: { event: { message: string } }) => log.event.message).join("\n");
    expect(line).toMatch(/component\.ts:8:\d+/);
    // The user's own text is theirs: a route is not a path of the server.
    expect(line).toContain("route /api/users");
    expectNoServerPath(line);
  });
});

describe("SLUICE_COMPONENT_URL_ALLOW_PRIVATE=false", () => {
  let sluice: SluiceProcess;
  let codeServer: Server;

  beforeAll(async () => {
    codeServer = createServer((_request, response) => response.end('export default { name: "private" };'));
    await new Promise<void>((resolve) => codeServer.listen(0, "127.0.0.1", resolve));
    sluice = await startSluice({ env: { SLUICE_COMPONENT_URL_ALLOW_PRIVATE: "false" } });
  });

  afterAll(async () => {
    await sluice?.stop();
    await new Promise((resolve) => codeServer?.close(resolve));
  });

  it("refuses a component_url on a loopback address, by its literal address and by a name", async () => {
    const api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const { port } = codeServer.address() as AddressInfo;
    const literal = await api("POST", "/components", { component_url: `http://127.0.0.1:${port}/c.mjs` });
    expect(literal.status).toBe(400);
    expect(literal.json.error).toBe("component_url: 127.0.0.1 is a private address");
    const named = await api("POST", "/sources", { component_url: `http://localhost:${port}/c.mjs` });
    expect(named.status).toBe(400);
    expect(named.json.error).toMatch(/^component_url: localhost resolves to a private address/);
  });
});
