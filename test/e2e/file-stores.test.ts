import { readdirSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiAnswer, apiClient } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * A project's File Store through `$.files` as a user sees it (docs/file-stores.md): steps of real
 * workflows on `npm start` write, read, list, pass on and delete files; their URLs are fetched as a
 * browser or curl would, with no API key; what is refused is refused at the step that asked.
 */
const step = (body: string) =>
  `import { Readable } from "node:stream";
   import { pipeline } from "node:stream/promises";
   import fs from "node:fs";
   export default defineComponent({ async run({ steps, $ }) { ${body} } })`;

interface Run {
  status: string;
  error: { name: string; message: string } | null;
  steps: { namespace: string; status: string }[];
}

describe("File Stores ($.files) against local mode", () => {
  let sluice: SluiceProcess;
  let api: (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;

  /** Runs `steps` once as a new workflow; the run and what its steps sent with `$.send.emit`. */
  async function runSteps(steps: Record<string, string>): Promise<{ run: Run; emitted: unknown[] }> {
    const created = await api("POST", "/workflows", {
      settings: { name: "files", auto_deploy: true },
      steps: Object.entries(steps).map(([namespace, code]) => ({ namespace, component_code: code })),
      triggers: [{ type: "http", props: { custom_response: false } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const { id, triggers } = created.json.data;
    const answer = await fetch(triggers[0].endpoint_url, { method: "POST", body: "{}" });
    expect(answer.status).toBe(200);
    await answer.arrayBuffer();
    const run = await eventually(async () => {
      const [newest] = (await api("GET", `/workflows/${id}/runs`)).json.data;
      return newest && newest.status !== "running" ? (newest as Run) : undefined;
    }, `the run of ${id}`);
    const emitted = (await api("GET", `/workflows/${id}/event_summaries?expand=event`)).json.data.map(
      (summary: { event: { raw_event: unknown } }) => summary.event.raw_event,
    );
    return { run, emitted: emitted.reverse() };
  }

  beforeAll(async () => {
    sluice = await startSluice({ env: { SLUICE_FILE_STORE_MB: "1", SLUICE_LOG_LEVEL: "info" } });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("writes files four ways, reads them back, lists folders, passes a file between steps and deletes", async () => {
    const { run, emitted } = await runSteps({
      write: step(`
        await $.files.open("/notes/a.txt").fromReadableStream(Readable.from(["hello ", "files"]));
        fs.writeFileSync("/tmp/local.csv", "id,qty\\n1,2\\n");
        await $.files.open("notes/b.csv").fromFile("/tmp/local.csv", "text/csv");
        const out = await $.files.open("notes/deep/c.json").createWriteStream("application/json", 7);
        await pipeline(Readable.from(['{"a":1}']), out);
        const d = $.files.open("d.bin");
        await d.fromReadableStream(Readable.from([Buffer.from([0, 1, 2, 255])]), "application/octet-stream", 4);
        return d;`),
      read: step(`
        const listing = [];
        for await (const entry of $.files.dir()) listing.push([entry.path, entry.isFile(), entry.isDirectory(), entry.size ?? null]);
        const notes = [];
        for await (const entry of $.files.dir("notes/")) notes.push([entry.name, entry.isFile() ? await entry.file.toEncodedString() : "dir"]);
        const passed = $.files.openDescriptor(steps.write.$return_value);
        await $.files.open("notes/deep/c.json").toFile("/tmp/c.json");
        const stream = await $.files.open("notes/a.txt").createReadStream();
        let streamed = "";
        for await (const chunk of stream) streamed += chunk;
        $.send.emit({ raw_event: {
          descriptor: steps.write.$return_value,
          listing, notes,
          passed: [...(await passed.toBuffer())],
          fromTmp: JSON.parse(fs.readFileSync("/tmp/c.json", "utf8")),
          streamed,
          part: await $.files.open("notes/a.txt").toEncodedString("utf8", 6),
          url: await $.files.open("notes/a.txt").toUrl(),
        } });`),
      remove: step(`
        await $.files.open("notes/deep/c.json").delete();
        const left = [];
        for await (const entry of $.files.dir("notes")) left.push(entry.name);
        let missing;
        try { await $.files.open("notes/deep/c.json").toBuffer(); } catch (error) { missing = error.name + ": " + error.message; }
        $.send.emit({ raw_event: { left, missing } });`),
    });
    expect(run.error).toBeNull();
    expect(run.status).toBe("success");
    const [read, removed] = emitted as [Record<string, unknown>, Record<string, unknown>];
    // A description carries the URL to read, never the one to write (it travels to later steps and events).
    expect(read.descriptor).toEqual({
      type: "PipedreamProjectFile",
      path: "d.bin",
      get_url: expect.stringContaining("/files/"),
      expires_at_ms: expect.any(Number),
    });
    expect(read.listing).toEqual([
      ["d.bin", true, false, 4],
      ["notes", false, true, null],
    ]);
    expect(read.notes).toEqual([
      ["a.txt", "hello files"],
      ["b.csv", "id,qty\n1,2\n"],
      ["deep", "dir"],
    ]);
    expect(read.passed).toEqual([0, 1, 2, 255]);
    expect(read.fromTmp).toEqual({ a: 1 });
    expect(read.streamed).toBe("hello files");
    expect(read.part).toBe("files");
    // The URL is the whole authority: fetched with no API key, as a browser would.
    const url = read.url as string;
    expect(url).toMatch(new RegExp(`^${sluice.baseUrl.replace(/\/v1$/, "")}/files/f1\\.\\d+\\.[^/]+/a\\.txt$`));
    const fetched = await fetch(url);
    expect(fetched.status).toBe(200);
    expect(await fetched.text()).toBe("hello files");
    // A URL to read does not write, and a changed token opens nothing.
    const put = await fetch(url, { method: "PUT", body: "overwritten" });
    expect(put.status).toBe(403);
    expect(((await put.json()) as { error: string }).error).toMatch(/for GET, not PUT/);
    const token = (url.split("/files/")[1] as string).split("/")[0] as string;
    const forged = await fetch(url.replace(token, `${token.slice(0, -12)}AAAAAAAAAAAA`));
    expect(forged.status).toBe(403);
    expect(await (await fetch(url)).text()).toBe("hello files");
    // Mistyped forms of the URL are 404s, and no form of it puts the token in the request log.
    for (const variant of [`${url}/`, `${url}/more`, url.replace("/files/", "//files/")]) {
      expect((await fetch(variant)).status, variant).toBe(404);
    }
    await eventually(
      async () => (sluice.output().includes("/files/{token}/{name}") ? true : undefined),
      "a logged file request",
    );
    expect(sluice.output()).not.toContain(token);
    expect(removed).toEqual({
      left: ["a.txt", "b.csv"],
      missing: 'FileStoreError: $.files: there is no file "notes/deep/c.json" in the File Store',
    });
    // Stored under the data dir, in the project's own folder; the empty folder went with its file.
    const [project] = readdirSync(join(sluice.dataDir, "file-stores")).filter((name) => name.startsWith("proj_"));
    expect(readdirSync(join(sluice.dataDir, "file-stores", project as string, "notes")).sort()).toEqual([
      "a.txt",
      "b.csv",
    ]);
  });

  it("is the project's: another workflow sees the files, and a step's wrong path fails that step", async () => {
    const { run, emitted } = await runSteps({
      read: step(`$.send.emit({ raw_event: await $.files.open("notes/a.txt").toEncodedString() });`),
      wrong: step(`$.files.open("../../etc/passwd");`),
    });
    expect(emitted).toEqual(["hello files"]);
    expect(run.status).toBe("error");
    expect(run.error).toMatchObject({
      code: "TypeError",
      message: 'the File Store path "../../etc/passwd" has an empty, "." or ".." part',
    });
  });

  it("streams a copy from a URL and into a write stream of a declared length, refusing a length that does not match", async () => {
    const { run, emitted } = await runSteps({
      copy: step(`
        await $.files.open("copies/a.txt").fromUrl(await $.files.open("notes/a.txt").toUrl());
        const out = await $.files.open("copies/short.txt").createWriteStream("text/plain", 10);
        let refused;
        try { await pipeline(Readable.from(["12345"]), out); } catch (error) { refused = error.message; }
        let missing = "no";
        try { await $.files.open("copies/short.txt").toBuffer(); } catch (error) { missing = error.name; }
        $.send.emit({ raw_event: { copied: await $.files.open("copies/a.txt").toEncodedString(), refused: Boolean(refused), missing } });`),
    });
    expect(run.status, JSON.stringify(run.error)).toBe("success");
    expect(emitted).toEqual([{ copied: "hello files", refused: true, missing: "FileStoreError" }]);
  });

  it("refuses an upload past the project's bound (SLUICE_FILE_STORE_MB) and keeps what was there", async () => {
    const { run, emitted } = await runSteps({
      big: step(`
        let refused;
        try {
          await $.files.open("notes/a.txt").fromReadableStream(Readable.from([Buffer.alloc(2 * 1024 * 1024)]));
        } catch (error) { refused = error.name + ": " + error.message; }
        $.send.emit({ raw_event: { refused, kept: await $.files.open("notes/a.txt").toEncodedString() } });`),
    });
    expect(run.status).toBe("success");
    expect(emitted).toEqual([
      {
        refused: expect.stringMatching(
          /^FileStoreError: \$\.files: writing "notes\/a\.txt" failed with HTTP 413: .*at most 1 MiB in all \(SLUICE_FILE_STORE_MB\)/,
        ),
        kept: "hello files",
      },
    ]);
    expect(readdirSync(join(sluice.dataDir, "file-stores", ".incoming"))).toEqual([]);
  });

  it("reads a refused upload's body no further than a bound, and answers 409, not 500, to a file racing a folder", async () => {
    // A PUT with a forged token declaring 100 MB: answered 403, and the server stops reading.
    const target = new URL(`${sluice.baseUrl.replace(/\/v1$/, "")}/files/f1.99999999999999.AAAA/x`);
    const { status, sent } = await new Promise<{ status: number; sent: number }>((resolve, reject) => {
      const request = httpRequest(target, { method: "PUT", headers: { "content-length": String(100 * 1024 * 1024) } });
      let sent = 0;
      let status = 0;
      const chunk = Buffer.alloc(64 * 1024);
      const pump = () => {
        while (sent < 100 * 1024 * 1024 && !request.destroyed) {
          sent += chunk.length;
          if (!request.write(chunk)) return void request.once("drain", pump);
        }
      };
      request.on("response", (response) => {
        status = response.statusCode ?? 0;
        response.resume();
      });
      request.on("error", () => resolve({ status, sent }));
      request.on("close", () => resolve({ status, sent }));
      setTimeout(() => reject(new Error("the server kept reading")), 20_000).unref();
      pump();
    });
    expect(status).toBe(403);
    expect(sent).toBeLessThan(40 * 1024 * 1024);

    const { run, emitted } = await runSteps({
      race: step(`
        const outcomes = await Promise.allSettled([...Array(6).keys()].flatMap((i) => [
          $.files.open("race" + i).fromReadableStream(Readable.from(["f"])),
          $.files.open("race" + i + "/inner").fromReadableStream(Readable.from(["g"])),
        ]));
        $.send.emit({ raw_event: outcomes.map((o) => o.status === "fulfilled" ? "ok" : o.reason.message) });`),
    });
    expect(run.status).toBe("success");
    for (const outcome of emitted[0] as string[]) {
      expect(outcome).toMatch(/^ok$|HTTP 409: .*(has a folder at|has a file at|changed: try again)/);
    }
  });
});
