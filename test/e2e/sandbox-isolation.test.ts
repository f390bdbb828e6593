import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createNetServer } from "node:net";
import { getPriority, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { REPO_ROOT, type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * Issue 12, against `npm start`: what one source's code can reach of another source and of the
 * server. Two sources of one workspace never share a process, so a source cannot read another's
 * decrypted secret props by patching what the runtime uses; a component cannot renice the server;
 * and a descriptor the server inherited without close-on-exec (a shell's `exec 40<file`) does not
 * reach component code.
 */

const SECRET = `secret-${randomBytes(12).toString("hex")}`;
/** In the file the server holds open on fd 40. */
const FILE_SECRET = `inherited-${randomBytes(12).toString("hex")}`;
/** Node itself sets close-on-exec on inherited descriptors up to 16 at start; higher ones it leaves. */
const INHERITED_FD = 40;

/** Has a secret prop; each run takes a moment, so that runs of the spy overlap it. */
const KEEPER = `
export default {
  name: "Keeper",
  version: "1.0.0",
  props: { http: "$.interface.http", token: { type: "string", secret: true } },
  async run() {
    await new Promise((resolve) => setTimeout(resolve, 200));
    this.$emit({ tokenLength: this.token.length });
  },
};
`;

/**
 * Installs every obvious hook on what the runtime uses in its process, keeps what passes through,
 * and emits it on request. Its first run stays a few seconds, so that it runs while the keeper does.
 */
const SPY = `
const seen = [];
const keep = (route, value) => {
  try { seen.push(route + " " + (typeof value === "string" ? value : JSON.stringify(value))); } catch {}
};
function install() {
  const parse = JSON.parse;
  JSON.parse = function (text, ...rest) { keep("JSON.parse", text); return parse.call(this, text, ...rest); };
  const stringify = JSON.stringify;
  JSON.stringify = function (value, ...rest) {
    const text = stringify.call(this, value, ...rest);
    if (typeof text === "string") seen.push("JSON.stringify " + text);
    return text;
  };
  Object.defineProperty(Object.prototype, "token", {
    configurable: true,
    set(value) {
      keep("Object.prototype.token", value);
      Object.defineProperty(this, "token", { value, writable: true, enumerable: true, configurable: true });
    },
  });
  // The runtime's own module state: its invocation scope lives on a global symbol.
  const storage = globalThis[Symbol.for("sluice.runtime.invocation-scope")];
  if (storage) {
    const run = storage.run;
    storage.run = function (scope, fn, ...rest) {
      keep("scope", scope && scope.invocation && scope.invocation.props);
      return run.call(this, scope, fn, ...rest);
    };
  }
  // Node's IPC channel, which the sandbox used before issue 12.
  if (typeof process.on === "function") process.on("message", (message) => keep("ipc", message));
}
export default {
  name: "Spy",
  version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) {
    if (event.body.install) {
      install();
      await new Promise((resolve) => setTimeout(resolve, 3000));
    }
    if (event.body.report) this.$emit({ seen });
  },
};
`;

const PRIORITY = `
import os from "node:os";
export default {
  name: "Renicer",
  version: "1.0.0",
  props: { http: "$.interface.http" },
  async run() {
    try { os.setPriority(process.ppid, 19); this.$emit("reniced"); } catch (error) { this.$emit(error.code); }
  },
};
`;

/**
 * An HTTP source that emits what `body` returns (its run's `event` in scope), after `head`
 * (imports); `attempt(call)` gives `"done"`, or the code of the error `call` threw.
 */
const probe = (name: string, body: string, head = "") => `
${head}
const attempt = (call) => { try { call(); return "done"; } catch (error) { return error.code; } };
export default {
  name: "${name}",
  version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit(await (async () => { ${body} })());
  },
};
`;

/** Asks the server (its parent) to open its inspector, as SIGUSR1 does to a Node process. */
const DEBUGGER = probe("Debugger opener", "return attempt(() => process._debugProcess(process.ppid));");

/** Tries a Unix socket three ways (its path in the event), to listen on one and on TCP ports (also through `_listen2`); emits each outcome. */
const UNIX_SOCKETS = probe(
  "Unix socket user",
  `const path = event.body.path;
    // As an instrumentation library would: the wrapped connect is the guarded one.
    const connect = net.Socket.prototype.connect;
    net.Socket.prototype.connect = function (...args) { return connect.apply(this, args); };
    return [
      await outcome(() => net.connect({ path })),
      await outcome(() => net.createConnection(path)),
      await outcome(() => http.get({ socketPath: path, path: "/" })),
      await outcome(() => net.createServer().listen(path + ".mine")),
      await outcome(() => net.createServer().listen(0, "127.0.0.1")),
      await outcome(() => http.createServer().listen({ port: 0 })),
      // listen's last step, public under its legacy name: past a guard on listen alone.
      await outcome(() => { const server = net.createServer(); server._listen2("127.0.0.1", 0, 4, 511); return server; }),
      await outcome(() => { const server = net.createServer(); server._listen2(path + ".other", -1, -1, 511); return server; }),
      await outcome(() => net.connect({ port: 1, host: "127.0.0.1" })),
      // The handle maker under both, exported: a handle bound and listening with no Server at all.
      handle("127.0.0.1", 0, 4),
      handle(path + ".handle", -1, -1),
    ];`,
  `import net from "node:net";
import http from "node:http";
const handle = (address, port, type) => {
  const made = net._createServerHandle(address, port, type);
  return typeof made === "number" ? made : "listen " + made.listen(511);
};
const outcome = (start) => new Promise((resolve) => {
  try {
    const emitter = start();
    emitter.on("error", (error) => resolve(error.code));
    emitter.on("connect", () => resolve("connected"));
    emitter.on("response", () => resolve("answered"));
    emitter.on("listening", () => resolve("listening"));
  } catch (error) { resolve("threw " + error.code); }
});`,
);

/** Tries to take another user's identity (which works when Sluice runs as root). */
const IDENTITY = probe(
  "Identity changer",
  "return [attempt(() => process.setuid(65534)), attempt(() => process.setgid(65534)), attempt(() => process.setgroups([65534]))];",
);

/** Emits its process's id. */
const PID = probe("Pid", "return process.pid;");

/** Tries to trace to files (Node writes them into the working dir), through both exports. */
const TRACER = probe(
  "Tracer",
  `return [
      attempt(() => traceEvents.createTracing({ categories: ["node"] }).enable()),
      attempt(() => createTracing({ categories: ["node"] }).enable()),
    ];`,
  'import traceEvents, { createTracing } from "node:trace_events";',
);

/** Tries to turn on V8's internal functions, through the default and the named export. */
const V8_FLAGS = probe(
  "Flag setter",
  `const attempts = [attempt(() => v8.setFlagsFromString("--allow-natives-syntax")), attempt(() => setFlagsFromString("--allow-natives-syntax"))];
    let natives;
    try { natives = typeof new Function("return %GetOptimizationStatus(function () {})")(); } catch { natives = "unreachable"; }
    return [...attempts, natives];`,
  'import v8, { setFlagsFromString } from "node:v8";',
);

/** Reads whatever descriptors above the child's own it can, and emits what it found. */
const FD_READER = `
import { readSync } from "node:fs";
export default {
  name: "Descriptor reader",
  version: "1.0.0",
  props: { http: "$.interface.http" },
  async run() {
    const found = {};
    for (let fd = 5; fd < 256; fd++) {
      try {
        const buffer = Buffer.alloc(256);
        // At position 0: a pipe or socket answers ESPIPE at once instead of blocking.
        const read = readSync(fd, buffer, 0, 256, 0);
        found[fd] = buffer.subarray(0, read).toString();
      } catch (error) {
        if (error.code !== "EBADF") found[fd] = error.code;
      }
    }
    this.$emit(found);
  },
};
`;

describe("sandbox isolation between sources, and from the server", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let fileDir: string;

  beforeAll(async () => {
    fileDir = mkdtempSync(join(tmpdir(), "sluice-inherited-"));
    const file = join(fileDir, "secret.txt");
    writeFileSync(file, FILE_SECRET);
    // Each source has its own process now; one per workspace made the old code share one too.
    sluice = await startSluice({
      openFile: { fd: INHERITED_FD, path: file },
      // As on a machine that keeps core dumps: the children must still leave none.
      coreDumps: true,
      env: { SLUICE_SANDBOX_PROCESSES: "1" },
    });
    // The premise: the server holds it without close-on-exec (O_CLOEXEC is 02000000 in fdinfo's octal flags).
    const flags = /^flags:\s+([0-7]+)/m.exec(readFileSync(`/proc/${sluice.child.pid}/fdinfo/${INHERITED_FD}`, "utf8"));
    expect(Number.parseInt(flags?.[1] ?? "2000000", 8) & 0o2000000).toBe(0);
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  }, 60_000);

  afterAll(async () => {
    await sluice?.stop();
    rmSync(fileDir, { recursive: true, force: true });
  });

  async function deploy(code: string, configured_props?: Record<string, unknown>) {
    const answer = await api("POST", "/sources", { component_code: code, configured_props });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    return {
      id: answer.json.data.id as string,
      endpoint: answer.json.data.configured_props.http.endpoint_url as string,
    };
  }

  const post = (endpoint: string, body: unknown) =>
    fetch(endpoint, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  async function eventsOf(id: string, count: number): Promise<unknown[]> {
    return eventually(
      async () => {
        const page = await api("GET", `/sources/${id}/event_summaries?expand=event&limit=50`);
        return page.json.data.length >= count
          ? page.json.data.map((each: { event: unknown }) => each.event)
          : undefined;
      },
      `${count} events of ${id}`,
      { timeoutMs: 20_000, intervalMs: 50 },
    );
  }

  it("does not let one source of a workspace obtain another's secret prop while both run", async () => {
    const keeper = await deploy(KEEPER, { token: SECRET });
    const spy = await deploy(SPY);
    // The spy's hooks are in place, and its run is still going while the keeper's runs come and go.
    const installing = post(spy.endpoint, { install: true });
    expect((await installing).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (let n = 0; n < 3; n++) expect((await post(keeper.endpoint, { n })).status).toBe(200);
    expect(await eventsOf(keeper.id, 3)).toEqual(Array(3).fill({ tokenLength: SECRET.length }));

    expect((await post(spy.endpoint, { report: true })).status).toBe(200);
    const [report] = (await eventsOf(spy.id, 1)) as { seen: string[] }[];
    expect(JSON.stringify(report)).not.toContain(SECRET);
    // The hooks work: they saw the spy's own request.
    expect(report?.seen.some((line) => line.includes('"report":true'))).toBe(true);
  }, 60_000);

  it("does not let a component change the server's priority", async () => {
    const before = getPriority(sluice.child.pid);
    const renicer = await deploy(PRIORITY);
    expect((await post(renicer.endpoint, {})).status).toBe(200);
    expect(await eventsOf(renicer.id, 1)).toEqual(["EPERM"]);
    expect(getPriority(sluice.child.pid)).toBe(before);
  }, 30_000);

  it("does not let a component open the server's inspector, and the server ignores SIGUSR1 itself", async () => {
    const opener = await deploy(DEBUGGER);
    expect((await post(opener.endpoint, {})).status).toBe(200);
    expect(await eventsOf(opener.id, 1)).toEqual(["EPERM"]);
    // Sent by anything else of this user: logged and ignored, the server still serves.
    sluice.child.kill("SIGUSR1");
    await eventually(
      async () => (sluice.output().includes("SIGUSR1 ignored") ? true : undefined),
      "the SIGUSR1 warning",
    );
    expect((await api("GET", "/users/me")).status).toBe(200);
    expect(sluice.output()).not.toContain("Debugger listening");
  }, 30_000);

  it("runs a component's process with its memory and open files capped, and no core dumps", async () => {
    const pid = await deploy(PID);
    expect((await post(pid.endpoint, {})).status).toBe(200);
    const [childPid] = (await eventsOf(pid.id, 1)) as number[];
    const limits = readFileSync(`/proc/${childPid}/limits`, "utf8");
    // The heap cap (128 MiB by default) + 384 MiB, in bytes; soft and hard.
    expect(limits).toMatch(/^Max data size\s+536870912\s+536870912\s+bytes\s*$/m);
    expect(limits).toMatch(/^Max core file size\s+0\s+\S+\s+bytes\s*$/m);
    // Its sockets too: connections to the server must not take the server's own descriptors.
    expect(limits).toMatch(/^Max open files\s+1024\s+1024\s+files\s*$/m);
  }, 30_000);

  it("does not let a component write trace files into the server's working dir", async () => {
    const before = readdirSync(REPO_ROOT).filter((name) => name.startsWith("node_trace"));
    const tracer = await deploy(TRACER);
    expect((await post(tracer.endpoint, {})).status).toBe(200);
    expect(await eventsOf(tracer.id, 1)).toEqual([["EPERM", "EPERM"]]);
    expect(readdirSync(REPO_ROOT).filter((name) => name.startsWith("node_trace"))).toEqual(before);
  }, 30_000);

  it("does not let a component change its user or groups (which root would allow)", async () => {
    const changer = await deploy(IDENTITY);
    expect((await post(changer.endpoint, {})).status).toBe(200);
    expect(await eventsOf(changer.id, 1)).toEqual([["EPERM", "EPERM", "EPERM"]]);
  }, 30_000);

  it("does not let a component change V8's flags (its internal functions stay out of reach)", async () => {
    const setter = await deploy(V8_FLAGS);
    expect((await post(setter.endpoint, {})).status).toBe(200);
    expect(await eventsOf(setter.id, 1)).toEqual([["EPERM", "EPERM", "unreachable"]]);
  }, 30_000);

  it("does not let a component use a Unix socket or listen on any port (outgoing TCP is untouched)", async () => {
    const folder = mkdtempSync(join(tmpdir(), "sluice-uds-"));
    const path = join(folder, "service.sock");
    let connections = 0;
    const service = createNetServer((socket) => {
      connections++;
      socket.end("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
    });
    await new Promise<void>((resolve) => service.listen(path, resolve));
    try {
      const user = await deploy(UNIX_SOCKETS);
      expect((await post(user.endpoint, { path })).status).toBe(200);
      expect(await eventsOf(user.id, 1)).toEqual([
        ["EACCES", "EACCES", "EACCES", "EACCES", "EACCES", "EACCES", "EACCES", "EACCES", "ECONNREFUSED", -13, -13],
      ]);
      expect(connections).toBe(0);
      expect(existsSync(`${path}.mine`)).toBe(false);
      expect(existsSync(`${path}.other`)).toBe(false);
      expect(existsSync(`${path}.handle`)).toBe(false);
    } finally {
      service.close();
      rmSync(folder, { recursive: true, force: true });
    }
  }, 30_000);

  it("does not pass the server's inherited descriptors on to component code", async () => {
    const reader = await deploy(FD_READER);
    expect((await post(reader.endpoint, {})).status).toBe(200);
    const [found] = (await eventsOf(reader.id, 1)) as Record<string, string>[];
    expect(found).toBeDefined();
    expect(JSON.stringify(found)).not.toContain(FILE_SECRET);
  }, 30_000);
});
