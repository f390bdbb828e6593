/**
 * A sandbox child's `/tmp` (decision 551): real children under Node's permission model, through
 * `ProcessPoolHost`; nothing mocked. The work dirs are under the machine's own `/tmp`, which the
 * children must not see either.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessPoolHost } from "#adapters/local/process-pool-host";
import type { SourceCode } from "#core/ports/component-host";
import type { InvocationResult, Json } from "#runtime/protocol";
import { isAlive, realPathForChild, runInvocation, sourceCode, withPoolHost } from "../support/pool-host.ts";

let workDir: string;
let host: ProcessPoolHost;

beforeAll(() => {
  workDir = mkdtempSync(join(tmpdir(), "sluice-tmp-"));
  host = new ProcessPoolHost({ workDir, heapMb: 64 });
});

afterAll(async () => {
  await host.close();
  rmSync(workDir, { recursive: true, force: true });
});

const source = (sourceId: string, code: string) => sourceCode(sourceId, code);
const invocation = (sourceId: string, event?: Json) => runInvocation(sourceId, event === undefined ? {} : { event });

const run = (on: ProcessPoolHost, code: SourceCode, event?: Json): Promise<InvocationResult> =>
  on.invoke(code, invocation(code.sourceId, event));

/** The one event a run emitted (its error, if it failed). */
async function emitted(on: ProcessPoolHost, code: SourceCode, event?: Json): Promise<Json> {
  const result = await run(on, code, event);
  expect(result.error).toBeUndefined();
  return result.emits[0]?.event ?? null;
}

/** The folders of live children's `/tmp` under `dir`. */
const tmpFolders = (dir: string) => (existsSync(join(dir, "tmp")) ? readdirSync(join(dir, "tmp")) : []);

/** Runs `code` as a source whose run does what `event.step` says, all in one child. */
const STEPS = `import fs from "node:fs";
import { writeFileSync } from "node:fs";
import { mkdtemp, readFile, readdir } from "node:fs/promises";
import os from "node:os";
const attempt = (fn) => { try { return fn(); } catch (error) { return error.code + ": " + error.message; } };
export default { async run(event) {
  if (event.step === "write") {
    writeFileSync("/tmp/a.txt", "hello");
    fs.mkdirSync(os.tmpdir() + "/nested/deeper", { recursive: true });
    await fs.promises.writeFile("/tmp/nested/deeper/b.json", JSON.stringify({ b: 1 }));
    await new Promise((resolve, reject) => fs.createWriteStream("//tmp/./c.txt").on("error", reject).end("streamed", resolve));
    const made = await mkdtemp("/tmp/job-");
    fs.writeFile(new URL("file:///tmp/d.txt"), "by url", (error) => this.$emit({ made, tmpdir: os.tmpdir(), error: error?.code ?? null }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    return;
  }
  this.$emit({
    a: fs.readFileSync("/tmp/a.txt", "utf8"),
    b: JSON.parse(await readFile("/tmp/nested/deeper/b.json", "utf8")),
    c: fs.readFileSync(Buffer.from("/tmp/c.txt"), "utf8"),
    d: fs.readFileSync("/tmp/d.txt", "utf8"),
    listed: (await readdir("/tmp")).sort(),
    real: fs.realpathSync("/tmp/a.txt"),
    missing: attempt(() => fs.readFileSync("/tmp/missing.txt")),
    stat: fs.statSync("/tmp/a.txt").size,
  });
} };`;

describe("a sandbox child's /tmp", () => {
  it("is a folder of its own that its code names /tmp, kept across runs, shown as /tmp in answers and errors", async () => {
    const code = source("dc_tmp_own", STEPS);
    const written = (await emitted(host, code, { step: "write" })) as { made: string; tmpdir: string; error: null };
    expect(written).toEqual({ made: expect.stringMatching(/^\/tmp\/job-\w{6}$/), tmpdir: "/tmp", error: null });
    const read = (await emitted(host, code, { step: "read" })) as Record<string, Json>;
    expect(read).toEqual({
      a: "hello",
      b: { b: 1 },
      c: "streamed",
      d: "by url",
      listed: ["a.txt", "c.txt", "d.txt", written.made.slice("/tmp/".length), "nested"].sort(),
      real: "/tmp/a.txt",
      missing: "ENOENT: ENOENT: no such file or directory, open '/tmp/missing.txt'",
      stat: 5,
    });
    // The files are in the child's folder under the work dir, not in the machine's /tmp.
    const [folder, ...others] = tmpFolders(workDir);
    expect(others).toEqual([]);
    expect(existsSync(join(workDir, "tmp", folder as string, "nested", "deeper", "b.json"))).toBe(true);
    expect(existsSync("/tmp/a.txt") && existsSync("/tmp/d.txt")).toBe(false);
  });

  it("shows a source neither another source's /tmp nor the machine's, and keeps its writes there", async () => {
    const hostFile = join(workDir, "host-file.txt");
    writeFileSync(hostFile, "the server's");
    const peek = source(
      "dc_tmp_peek",
      `import fs from "node:fs";
      const attempt = (fn) => { try { return fn(); } catch (error) { return error.code; } };
      export default { run() {
        this.$emit({
          otherSource: attempt(() => fs.readFileSync("/tmp/a.txt", "utf8")),
          hostFile: attempt(() => fs.readFileSync(${JSON.stringify(hostFile)}, "utf8")),
          hostFileOverwritten: attempt(() => fs.writeFileSync(${JSON.stringify(hostFile)}, "overwritten")),
          pastTheMapping: attempt(() => fs.writeFileSync(${JSON.stringify(realPathForChild(hostFile))}, "overwritten")),
          listed: fs.readdirSync("/tmp"),
        });
      } };`,
    );
    expect(await emitted(host, peek)).toEqual({
      otherSource: "ENOENT",
      // Its /tmp has no such folder: the name does not reach the server's file...
      hostFile: "ENOENT",
      hostFileOverwritten: "ENOENT",
      // ...and a name that does is refused by the permission model.
      pastTheMapping: "ERR_ACCESS_DENIED",
      listed: [],
    });
    expect(readFileSync(hostFile, "utf8")).toBe("the server's");
  });

  it("refuses symlinks, hard links to files outside /tmp, and writes that climb out of it or reach code", async () => {
    const code = source(
      "dc_tmp_links",
      `import fs from "node:fs";
      import { fileURLToPath } from "node:url";
      const attempt = (fn) => { try { fn(); return "done"; } catch (error) { return error.code; } };
      export default { async run() {
        fs.writeFileSync("/tmp/mine.txt", "x");
        // The runtime's entry, which every sandbox process runs, and this source's own bundle: both readable.
        const entry = process.argv[1];
        const bundle = fileURLToPath(import.meta.url);
        this.$emit([
          attempt(() => fs.symlinkSync("/etc/passwd", "/tmp/passwd")),
          attempt(() => fs.symlinkSync("../..", "/tmp/up")),
          await fs.promises.symlink("/", "/tmp/root").then(() => "done", (error) => error.code),
          attempt(() => fs.linkSync(entry, "/tmp/entry.mjs")),
          await fs.promises.link(bundle, "/tmp/bundle.mjs").then(() => "done", (error) => error.code),
          attempt(() => fs.copyFileSync("/tmp/mine.txt", entry)),
          attempt(() => fs.writeFileSync(bundle, "export default {};")),
          attempt(() => fs.renameSync(bundle, "/tmp/taken.mjs")),
          attempt(() => fs.writeFileSync("/tmp/../etc/sluice-escape", "x")),
          attempt(() => fs.renameSync("/tmp/mine.txt", "/tmp/../mine.txt")),
          // Within its own /tmp, all of this is allowed.
          attempt(() => fs.linkSync("/tmp/mine.txt", "/tmp/hard.txt")),
          attempt(() => fs.copyFileSync(bundle, "/tmp/copy.mjs")),
          attempt(() => fs.renameSync("/tmp/mine.txt", "/tmp/renamed.txt")),
        ]);
      } };`,
    );
    const denied = "ERR_ACCESS_DENIED";
    expect(await emitted(host, code)).toEqual([...Array<string>(10).fill(denied), "done", "done", "done"]);
    expect(existsSync("/etc/sluice-escape")).toBe(false);
  });

  it("is removed when its process exits, and what an earlier server left is removed when a host starts", async () => {
    const stale = (dir: string) => join(dir, "tmp", "p-left-by-a-killed-server");
    await withPoolHost(
      { idleMs: 300 },
      async (own, dir) => {
        expect(existsSync(stale(dir))).toBe(false);
        const code = source(
          "dc_tmp_life",
          `import fs from "node:fs"; export default { run() { fs.writeFileSync("/tmp/f", "x"); this.$emit(process.pid); } };`,
        );
        const pid = (await emitted(own, code)) as number;
        expect(tmpFolders(dir)).toHaveLength(1);
        // Idle for 300 ms: the child is stopped, and its folder goes with it.
        await waitFor(() => !isAlive(pid) && tmpFolders(dir).length === 0);
        expect(tmpFolders(dir)).toEqual([]);
      },
      (dir) => {
        mkdirSync(stale(dir), { recursive: true });
        writeFileSync(join(stale(dir), "old.bin"), "x");
      },
    );
  });

  it("bounds one file (EFBIG) and the whole folder (the process is stopped, its runs fail, the folder emptied)", async () => {
    await withPoolHost({ tmpMb: 1 }, async (own, dir) => {
      const code = source(
        "dc_tmp_full",
        `import fs from "node:fs";
        export default { async run(event) {
          if (event.one) {
            try { fs.writeFileSync("/tmp/big", Buffer.alloc(2 * 1024 * 1024, 1)); this.$emit("written"); }
            catch (error) { this.$emit(error.code); }
            return;
          }
          for (let i = 0; i < 3; i++) fs.writeFileSync("/tmp/part" + i, Buffer.alloc(900 * 1024, 1));
          await new Promise((resolve) => setTimeout(resolve, 5000));
          this.$emit("survived");
        } };`,
      );
      expect(await emitted(own, code, { one: true })).toBe("EFBIG");
      const result = await run(own, code, { one: false });
      expect(result.error).toMatchObject({
        name: "SandboxError",
        message: "its /tmp held over 1 MiB; the sandbox process was stopped and its /tmp emptied",
      });
      await waitFor(() => tmpFolders(dir).length === 0);
    });
  });

  it("sees what a child hides from a walk: files deleted but held open, paths past PATH_MAX", async () => {
    await withPoolHost({ tmpMb: 1 }, async (own, dir) => {
      const code = source(
        "dc_tmp_hide",
        `import fs from "node:fs";
        const held = [];
        export default { async run(event) {
          const chunk = Buffer.alloc(900 * 1024, 1);
          if (event.how === "held") {
            for (let i = 0; i < 3; i++) {
              const fd = fs.openSync("/tmp/h" + i, "w");
              fs.writeSync(fd, chunk);
              fs.unlinkSync("/tmp/h" + i);
              held.push(fd);
            }
          } else {
            const segment = "d".repeat(200);
            const a = "/tmp/a" + ("/" + segment).repeat(12);
            const b = "/tmp/b" + ("/" + segment).repeat(12);
            fs.mkdirSync(a, { recursive: true });
            fs.mkdirSync(b, { recursive: true });
            fs.writeFileSync(b + "/f", "x");
            fs.renameSync("/tmp/b", a + "/b");
          }
          this.$emit(fs.readdirSync("/tmp").length);
          await new Promise((resolve) => setTimeout(resolve, 5000));
        } };`,
      );
      const held = await run(own, code, { how: "held" });
      expect(held.error).toMatchObject({ name: "SandboxError", message: expect.stringMatching(/held over 1 MiB/) });
      const deep = await run(own, code, { how: "deep" });
      expect(deep.error).toMatchObject({
        name: "SandboxError",
        message: expect.stringMatching(/could not be measured \(ENAMETOOLONG/),
      });
      // Removed all the same, paths past PATH_MAX included.
      await waitFor(() => tmpFolders(dir).length === 0);
    });
  });

  it("refuses FileHandle.utimes, which Node 20's permission model lets through on any readable file", async () => {
    const code = source(
      "dc_tmp_utimes",
      `import { open } from "node:fs/promises";
      import { fileURLToPath } from "node:url";
      export default { async run() {
        const handle = await open(fileURLToPath(import.meta.url), "r");
        try { await handle.utimes(0, 0); this.$emit("changed"); }
        catch (error) { this.$emit(error.code + ": " + error.message); }
        finally { await handle.close(); }
      } };`,
    );
    expect(await emitted(host, code)).toBe(
      "EPERM: utimes EPERM: a sandbox process may not change a file's times through a FileHandle: use fs.utimes",
    );
  });

  it("lets a component write nothing when the host gives /tmp no room (tmpMb 0)", async () => {
    await withPoolHost({ tmpMb: 0 }, async (own, dir) => {
      const code = source(
        "dc_tmp_none",
        `import fs from "node:fs";
        export default { run() { try { fs.writeFileSync("/tmp/x", "x"); this.$emit("written"); } catch (error) { this.$emit(error.code); } } };`,
      );
      expect(await emitted(own, code)).toBe("ERR_ACCESS_DENIED");
      expect(tmpFolders(dir)).toEqual([]);
    });
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
