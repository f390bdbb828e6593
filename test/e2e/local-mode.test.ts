import { rmSync, statSync } from "node:fs";
import { Agent, request as httpRequest } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newDataDir, runSluice, type SluiceProcess, startSluice } from "../support/local-process.ts";
import { oversizedUpload } from "../support/oversized-upload.ts";

async function call(base: string, path: string, init: RequestInit & { key?: string } = {}) {
  const headers = new Headers(init.headers);
  if (init.key) headers.set("authorization", `Bearer ${init.key}`);
  const response = await fetch(`${base.replace(/\/v1$/, "")}${path}`, { ...init, headers });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) };
}

describe("local mode, started as a user starts it", () => {
  let sluice: SluiceProcess;
  let key: string;

  beforeAll(async () => {
    sluice = await startSluice();
    key = sluice.apiKeyFromFile();
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("prints the new key once, saves it readable by its owner only, and says where it is", () => {
    expect(key).toMatch(/^sluice_/);
    expect(sluice.output()).toContain(`\n  ${key}\n`);
    expect(sluice.output()).toMatch(/Sluice is ready at http:\/\/127\.0\.0\.1:\d+\/v1 \(API key in /);
    expect(statSync(join(sluice.dataDir, "api-key")).mode & 0o777).toBe(0o600);
  });

  it("serves /v1/users/me, the user's workspace and its projects with the printed key", async () => {
    const me = await call(sluice.baseUrl, "/v1/users/me", { key });
    expect(me.status).toBe(200);
    const user = me.json().data;
    expect(user).toMatchObject({ id: expect.stringMatching(/^u_/), username: "sluice", daily_invocations_used: 0 });
    const workspaceId: string = user.orgs[0].id;
    expect(workspaceId).toMatch(/^o_/);

    const workspace = await call(sluice.baseUrl, `/v1/workspaces/${workspaceId}`, { key });
    expect(workspace.json().data).toEqual(user.orgs[0]);

    const projects = await call(sluice.baseUrl, `/v1/workspaces/${workspaceId}/projects?exclude=hid,exceptions`, {
      key,
    });
    expect(projects.status).toBe(200);
    expect(projects.json().data).toEqual([expect.objectContaining({ id: expect.stringMatching(/^proj_/), org_id: 1 })]);
    expect(projects.json().data[0]).not.toHaveProperty("hid");
  });

  it("answers errors in the documented shape over real HTTP", async () => {
    const noKey = await call(sluice.baseUrl, "/v1/users/me");
    expect([noKey.status, noKey.json()]).toEqual([401, { error: expect.any(String) }]);

    const unknown = await call(sluice.baseUrl, "/v1/nothing/here", { key });
    expect([unknown.status, unknown.json()]).toEqual([404, { error: "no route for GET /v1/nothing/here" }]);

    const wrongMethod = await call(sluice.baseUrl, "/v1/users/me", { key, method: "DELETE" });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("allow")).toBe("GET");

    const badId = await call(sluice.baseUrl, "/v1/workspaces/%E0%A4%A", { key });
    expect(badId.status).toBe(400);
    expect(badId.json().error).toMatch(/^workspace_id: /);

    const otherWorkspace = await call(sluice.baseUrl, "/v1/workspaces/o_01m7xmwmfs81fnt1b2yfcg", { key });
    expect([otherWorkspace.status, otherWorkspace.json()]).toEqual([404, { error: "workspace not found" }]);
  });

  it.each([
    ["a declared length", true],
    ["a chunked upload", false],
  ])("answers 413 mid-upload to an oversized body with %s, and keeps serving", async (_, declared) => {
    // Sends 2 MiB of the body, more than the 1 MiB limit, then waits for the answer.
    const answer = await oversizedUpload(
      new URL(sluice.baseUrl),
      `GET /v1/users/me HTTP/1.1\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json`,
      { declared, sendBytes: 2 * 1024 * 1024 },
    );
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect((await call(sluice.baseUrl, "/v1/users/me", { key })).status).toBe(200);
  });

  it("drains the upload of a request it refused for its headers, so the client reads the 431 instead of a reset", async () => {
    // Node's parser reports its error again for every chunk after the refusal; that must not end
    // the socket while the client still sends (before the fix most of these saw EPIPE here: a body larger than the loopback buffers is still being written).
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const body = Buffer.alloc(6 * 1024 * 1024, "h");
    const { port } = new URL(sluice.baseUrl);
    const send = () =>
      new Promise<string>((resolve) => {
        const target = `/v1/subscriptions?pad=${"x".repeat(20_000)}`;
        const outgoing = httpRequest({ host: "127.0.0.1", port, method: "POST", path: target, agent }, (response) => {
          response.resume();
          response.on("end", () => resolve(String(response.statusCode)));
        });
        outgoing.on("error", (error) => resolve(`client error: ${error.message}`));
        outgoing.setHeader("authorization", `Bearer ${key}`);
        outgoing.setHeader("content-type", "application/json");
        outgoing.setHeader("content-length", String(body.length));
        outgoing.end(body);
      });
    try {
      const answers: string[] = [];
      for (let round = 0; round < 10; round++) answers.push(await send());
      expect(answers.filter((answer) => answer !== "431")).toEqual([]);
    } finally {
      agent.destroy();
    }
  });

  it("serves the OpenAPI document without a key", async () => {
    const document = await call(sluice.baseUrl, "/v1/openapi.json");
    expect(document.status).toBe(200);
    expect(document.json()).toMatchObject({ openapi: "3.1.0", paths: { "/v1/users/me": { get: expect.any(Object) } } });
  });
});

describe("local mode across restarts", () => {
  it("keeps its data and key across a SIGTERM restart, and never prints the key again", async () => {
    const dataDir = newDataDir();
    const first = await startSluice({ dataDir });
    const key = first.apiKeyFromFile();
    const before = (await call(first.baseUrl, "/v1/users/me", { key })).json().data;
    expect(await first.stop("SIGTERM")).toEqual({ code: 0, signal: null });

    const second = await startSluice({ dataDir });
    try {
      expect(second.output()).not.toContain(key);
      const after = await call(second.baseUrl, "/v1/users/me", { key });
      expect(after.status).toBe(200);
      expect(after.json().data).toEqual(before);
    } finally {
      expect(await second.stop("SIGINT")).toEqual({ code: 0, signal: null });
    }
  });

  it("says how to get a key when the key file is gone, and create-key makes one that works", async () => {
    const dataDir = newDataDir();
    await (await startSluice({ dataDir })).stop();
    rmSync(join(dataDir, "api-key"));

    const warned = await startSluice({ dataDir });
    expect(warned.output()).toContain("make a new key with: npm run sluice -- create-key");
    await warned.stop();

    const { stdout } = await runSluice(["create-key"], { SLUICE_DATA_DIR: dataDir });
    const key = stdout.split("\n")[0] ?? "";
    expect(key).toMatch(/^sluice_/);
    const after = await startSluice({ dataDir });
    try {
      expect(after.apiKeyFromFile()).toBe(key);
      expect((await call(after.baseUrl, "/v1/users/me", { key })).status).toBe(200);
    } finally {
      await after.stop();
    }
  });

  it("uses SLUICE_API_KEY instead of generating a key, without printing it", async () => {
    const key = "ci-pipeline-key-0123456789";
    const sluice = await startSluice({ env: { SLUICE_API_KEY: key } });
    try {
      expect(sluice.output()).not.toContain(key);
      expect(sluice.output()).toContain("API key from SLUICE_API_KEY");
      expect(sluice.apiKeyFromFile()).toBe(key);
      expect((await call(sluice.baseUrl, "/v1/users/me", { key })).status).toBe(200);
    } finally {
      await sluice.stop();
    }
  });

  it("refuses to start with an unusable SLUICE_API_KEY and says why", async () => {
    await expect(startSluice({ env: { SLUICE_API_KEY: "short" } })).rejects.toThrow(
      /api_key: must be at least 16 characters/,
    );
  });
});
