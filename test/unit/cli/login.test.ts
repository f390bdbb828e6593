import { mkdtempSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Io } from "../../../bin/cli/command.ts";
import { login } from "../../../bin/cli/commands/login.ts";
import { eventually, when } from "../../support/eventually.ts";

const KEY = "sluice_prompted-key-0123456789";

/** A terminal: stdin a TTY that the test types into, stdout and stderr recorded. */
function terminal() {
  const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => stdin });
  const written = { out: "", err: "" };
  const recorder = (key: "out" | "err") => {
    const stream = new PassThrough();
    stream.on("data", (chunk: Buffer) => {
      written[key] += chunk.toString();
    });
    return stream;
  };
  const home = mkdtempSync(join(tmpdir(), "sluice-login-home-"));
  const io: Io = {
    out: recorder("out"),
    err: recorder("err"),
    stdin,
    env: {},
    home,
    signal: new AbortController().signal,
  };
  return { io, stdin, written, profile: join(home, ".config", "sluice", "config.json") };
}

describe("sluice login at a terminal", () => {
  let server: Server;
  let url: string;

  beforeAll(async () => {
    server = createServer((request, response) => {
      // Another server, which answers 200 with text.
      if (request.url?.startsWith("/other/")) return response.writeHead(200).end("ok");
      const ok = request.url === "/v1/users/me" && request.headers.authorization === `Bearer ${KEY}`;
      response
        .writeHead(ok ? 200 : 401, { "content-type": "application/json" })
        .end(JSON.stringify(ok ? { data: { id: "u_1", username: "ada" } } : { error: "the API key is not valid" }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it("asks for the URL and the key, echoes the URL but not the key, and saves both", async () => {
    const { io, stdin, written, profile } = terminal();
    const done = login.run({}, [], io);
    await eventually(() => when(written.err.includes("Sluice URL [http://127.0.0.1:4000]: ")), "the URL question");
    stdin.write(`${url}\r`);
    await eventually(() => when(written.err.includes("API key (not shown): ")), "the key question");
    stdin.write(`${KEY}\r`);
    await done;
    expect(written.err).toContain(url);
    expect(written.err + written.out).not.toContain(KEY);
    expect(written.out).toBe(`Logged in to ${url} as ada; profile "default" saved in ${profile}\n`);
    expect(JSON.parse(readFileSync(profile, "utf8"))).toEqual({ profiles: { default: { url, api_key: KEY } } });
  });

  it("saves nothing when the typed key is refused", async () => {
    const { io, stdin, written, profile } = terminal();
    const done = login.run({ url }, [], io);
    await eventually(() => when(written.err.includes("API key (not shown): ")), "the key question");
    stdin.write("sluice_wrong-key-0123456789\r");
    await expect(done).rejects.toThrow(`${url} refused this API key (401): nothing saved`);
    expect(written.err).not.toContain("wrong-key");
    expect(() => readFileSync(profile)).toThrow();
  });

  it("says another server answered, not a JSON parser's words, and saves nothing", async () => {
    const { io, stdin, written, profile } = terminal();
    const done = login.run({ url: `${url}/other` }, [], io);
    await eventually(() => when(written.err.includes("API key (not shown): ")), "the key question");
    stdin.write(`${KEY}\r`);
    await expect(done).rejects.toThrow(`${url} did not answer GET /users/me as Sluice does (not JSON): nothing saved`);
    expect(() => readFileSync(profile)).toThrow();
  });
});
