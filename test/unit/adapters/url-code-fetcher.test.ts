import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UrlCodeFetcher } from "#adapters/url-code-fetcher";

describe("UrlCodeFetcher", () => {
  let server: Server;
  let base: string;
  let slowResponses: (() => void)[] = [];

  beforeAll(async () => {
    server = createServer((request, response) => {
      if (request.url === "/component.mjs") return response.end("export default { name: 'x', version: '1' }");
      if (request.url === "/redirect") {
        response.writeHead(302, { location: "/component.mjs" });
        return response.end();
      }
      if (request.url === "/loop") {
        response.writeHead(302, { location: "/loop" });
        return response.end();
      }
      if (request.url === "/big") return response.end("x".repeat(5000));
      // Each hop answers within the limit; the file, its 3 redirects together, does not.
      const hop = /^\/slow-hop\/(\d)$/.exec(request.url ?? "");
      if (hop) {
        const next = Number(hop[1]) + 1;
        const timer = setTimeout(() => {
          response.writeHead(302, { location: next > 3 ? "/component.mjs" : `/slow-hop/${next}` });
          response.end();
        }, 200);
        response.on("close", () => clearTimeout(timer));
        return;
      }
      // An entry that moved, importing a sibling of where it moved to.
      if (request.url === "/moved/entry.mjs") {
        response.writeHead(302, { location: "/elsewhere/dir/entry.mjs" });
        return response.end();
      }
      if (request.url === "/elsewhere/dir/entry.mjs") {
        return response.end('import { name } from "./sibling.mjs"; export default { name, version: "1" };');
      }
      if (request.url === "/elsewhere/dir/sibling.mjs") return response.end('export const name = "found";');
      if (request.url === "/slow") {
        slowResponses.push(() => response.end("late"));
        return;
      }
      response.writeHead(404);
      response.end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const finish of slowResponses) finish();
    slowResponses = [];
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const local = new UrlCodeFetcher({ allowPrivateAddresses: true, maxBytes: 1000, timeoutMs: 500 });

  it("fetches code and follows redirects", async () => {
    expect(await local.fetchCode(`${base}/component.mjs`)).toContain("export default");
    expect(await local.fetchCode(`${base}/redirect`)).toContain("export default");
  });

  it("gives one file its time limit, redirects included", async () => {
    const error = await local.fetchCode(`${base}/slow-hop/1`).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "validation", issues: [{ field: "component_url" }] });
    expect((error as Error).message).toMatch(/no answer within 0.5s/);
  });

  it("resolves a moved entry's imports against where it was found", async () => {
    const code = await local.fetchCode(`${base}/moved/entry.mjs`);
    // Packed as component files (JSON): the sibling's text is among them.
    expect(code).toContain("./sibling.mjs");
    expect(code).toContain(JSON.stringify('export const name = "found";').slice(1, -1));
  });

  it.each([
    ["/missing", /answered 404/],
    ["/loop", /more than 3 redirects/],
    ["/big", /larger than 1000 bytes/],
    ["/slow", /no answer within 0.5s/],
  ])("refuses %s with a validation error on component_url", async (path, message) => {
    const error = await local.fetchCode(`${base}${path}`).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "validation", issues: [{ field: "component_url" }] });
    expect((error as Error).message).toMatch(message);
  });

  it.each(["ftp://example.com/x.js", "file:///etc/passwd", "not a url", "http://user:pw@example.com/x.js"])(
    "refuses the URL %s",
    async (url) => {
      await expect(local.fetchCode(url)).rejects.toMatchObject({ code: "validation" });
    },
  );

  it("never connects to a private address when they are not allowed, by name or by IP", async () => {
    const guarded = new UrlCodeFetcher({ allowPrivateAddresses: false, timeoutMs: 2000 });
    await expect(guarded.fetchCode(`${base}/component.mjs`)).rejects.toThrow(/private address/);
    const port = (server.address() as AddressInfo).port;
    await expect(guarded.fetchCode(`http://localhost:${port}/component.mjs`)).rejects.toThrow(/private address/);
    await expect(guarded.fetchCode("http://169.254.169.254/latest/meta-data/")).rejects.toThrow(/private address/);
  });
});
