import { execFile } from "node:child_process";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { REPO_ROOT, runSluice, SLUICE_BIN, type SluiceProcess, startSluice } from "../support/local-process.ts";
import { type NpmRegistryFixture, startNpmRegistry } from "../support/npm-registry-fixture.ts";
import { type StandInOAuthProvider, startStandInOAuthProvider } from "../support/oauth-provider.ts";
import { folderFiles } from "../support/registry-tree.ts";

/*
 * README.md as a new user runs it: every shell block, in the order written, copied verbatim (read
 * from the file, never a copy kept here). The rules:
 *
 * - A shell block is a fenced block whose info string is `sh`, `bash`, `shell` or `console`.
 *   Blocks without one (sample output, sketches) and `js` blocks are not run.
 * - A block is skipped only when the line right before its opening fence is
 *   `<!-- not run by test/e2e/readme.test.ts: <reason> -->`, the reason saying why it cannot run
 *   here (it installs, runs this test suite, needs an AWS account...). It is reported as a skipped
 *   test named by that reason; a marker without a reason, or before anything but a shell block's
 *   fence, fails the run.
 * - Local mode is started as the Quick start's `npm start` starts it (`node bin/sluice.mjs start`), on a
 *   free port, with its data dir `.sluice` in the directory where the blocks run. The blocks get
 *   that port as `PORT`, as the Quick start tells a user who starts Sluice on another port.
 * - Each block runs in a fresh `bash -euo pipefail` in that directory, so any failing command or
 *   unset variable fails it. Its environment is what the blocks before it exported, and nothing
 *   they set without `export`: a block sets every other variable it uses.
 */

const MARKER_START = "<!-- not run by test/e2e/readme.test.ts";
const MARKER = /^<!-- not run by test\/e2e\/readme\.test\.ts: (.*\S.*) -->$/;
const SHELL_LANGUAGES = new Set(["sh", "bash", "shell", "console"]);

interface ShellBlock {
  /** `<heading> #<n>`: the nearest `##`/`###` heading above it, and its place among that section's shell blocks. */
  name: string;
  script: string;
  /** The marker's reason, for a block that is not run. */
  skip?: string;
}

/**
 * The shell blocks of `markdown`, in order. Throws on a skip marker without a reason, or one that
 * is not right before a shell block's fence.
 */
function shellBlocks(markdown: string): ShellBlock[] {
  const lines = markdown.split("\n");
  const language = (line: string | undefined) => /^```(\S*)/.exec(line ?? "")?.[1];
  const blocks: ShellBlock[] = [];
  let heading = "(top)";
  let perHeading = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const heading2or3 = /^#{2,3} (.+)$/.exec(line)?.[1];
    const fenced = language(line);
    if (heading2or3) {
      heading = heading2or3;
      perHeading = 0;
    } else if (line.startsWith(MARKER_START)) {
      if (!MARKER.test(line)) throw new Error(`line ${i + 1}: a skip marker needs a reason: ${line}`);
      if (!SHELL_LANGUAGES.has(language(lines[i + 1]) ?? ""))
        throw new Error(`line ${i + 1}: a skip marker must come right before a shell block's fence`);
    } else if (fenced !== undefined) {
      const end = lines.findIndex((next, j) => j > i && next.startsWith("```"));
      if (end < 0) throw new Error(`line ${i + 1}: a fenced block that never ends`);
      if (SHELL_LANGUAGES.has(fenced)) {
        const skip = MARKER.exec(lines[i - 1] ?? "")?.[1];
        const script = `${lines.slice(i + 1, end).join("\n")}\n`;
        blocks.push({ name: `${heading} #${++perHeading}`, script, ...(skip ? { skip } : {}) });
      }
      i = end;
    }
  }
  return blocks;
}

const README = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
const BLOCKS = shellBlocks(README);

interface BlockRun {
  stdout: string;
  /** stdout as lines, trailing blank lines left out. */
  lines: string[];
  /** The environment the block left exported (what the next block starts with). */
  env: Record<string, string>;
}

/**
 * A new user's terminal: the test's PATH (with this Node first, and a folder holding what
 * `npm link` puts on a user's PATH: `sluice`, a link to bin/sluice.mjs), HOME, TMPDIR and LANG,
 * nothing else (no variable of the test's that a block could use without setting it), `PORT`,
 * and `XDG_CONFIG_HOME` in a temporary folder, so that `sluice login` saves its profile there
 * rather than in the home of whoever runs the test.
 */
function userEnv(port: string): Record<string, string> {
  const linked = mkdtempSync(join(tmpdir(), "sluice-readme-bin-"));
  symlinkSync(SLUICE_BIN, join(linked, "sluice"));
  const env: Record<string, string> = {
    PATH: `${linked}:${dirname(process.execPath)}:${process.env.PATH ?? ""}`,
    PORT: port,
    XDG_CONFIG_HOME: mkdtempSync(join(tmpdir(), "sluice-readme-config-")),
  };
  for (const name of ["HOME", "TMPDIR", "LANG"]) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/**
 * Runs `script` in a fresh bash in `cwd` with `env`; resolves with what it printed and exported,
 * rejects with its output when it fails. Bounded: killed after 25 s.
 */
async function runBlock(script: string, cwd: string, env: Record<string, string>): Promise<BlockRun> {
  const envFile = join(mkdtempSync(join(tmpdir(), "sluice-readme-env-")), "env");
  // The block as written, then one line of the test's: dump what is exported now, to "$1".
  const wrapped = `${script}env -0 > "$1"\n`;
  try {
    const { stdout } = await promisify(execFile)("bash", ["-euo", "pipefail", "-c", wrapped, "bash", envFile], {
      cwd,
      env,
      timeout: 25_000,
    });
    const exported = Object.fromEntries(
      readFileSync(envFile, "utf8")
        .split("\0")
        .filter(Boolean)
        .map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]),
    );
    return { stdout, lines: stdout.replace(/\n+$/, "").split("\n"), env: exported };
  } catch (error) {
    const { code, stdout, stderr } = error as { code?: number; stdout?: string; stderr?: string };
    throw new Error(`the block failed (exit ${code}):\n--- stdout\n${stdout}\n--- stderr\n${stderr}`);
  }
}

const json = (line: string | undefined) => JSON.parse(line ?? "");
const readJson = (cwd: string, file: string) => JSON.parse(readFileSync(join(cwd, file), "utf8"));

describe("README.md, every shell block in order, as written", () => {
  let sluice: SluiceProcess;
  let cwd: string;
  let env: Record<string, string>;
  let api: ReturnType<typeof apiClient>;

  /** npm's registry, as far as `sluice registry add @pipedream/helper_functions` needs it: no network. */
  let npm: NpmRegistryFixture;

  /** The OAuth provider of the app `acme` that "Connect an OAuth app" connects, in the apps file Sluice starts with. */
  let provider: StandInOAuthProvider;

  beforeAll(async () => {
    cwd = mkdtempSync(join(tmpdir(), "sluice-readme-"));
    provider = await startStandInOAuthProvider();
    const appsFile = join(mkdtempSync(join(tmpdir(), "sluice-readme-apps-")), "apps.json");
    writeFileSync(appsFile, JSON.stringify({ apps: [provider.appEntry("acme")] }));
    // Relative, as `npm start`'s default `./.sluice` is.
    sluice = await startSluice({
      dataDir: relative(REPO_ROOT, join(cwd, ".sluice")),
      env: { SLUICE_APPS_FILE: appsFile },
    });
    // The installed dev dependency, served by name as npm's registry serves it.
    const helpers = join(REPO_ROOT, "node_modules", "@pipedream", "helper_functions");
    npm = await startNpmRegistry([
      {
        name: "@pipedream/helper_functions",
        version: JSON.parse(readFileSync(join(helpers, "package.json"), "utf8")).version,
        files: folderFiles(helpers, (path) => path !== "package.json"),
      },
    ]);
    env = { ...userEnv(new URL(sluice.baseUrl).port), SLUICE_NPM_REGISTRY: npm.url };
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
    await npm?.close();
    await provider?.close();
  });

  /** The source the CLI walk-through deploys. */
  let greetId = "";
  /** What each block must print or leave behind, by block name; a block without an entry must only succeed. */
  const checks: Record<string, (run: BlockRun) => Promise<void> | void> = {
    "Quick start #2": (run) => {
      expect(json(run.lines[0]).data.username).toBe("sluice");
      // What the later blocks rely on: the key and the root of this server, exported.
      expect(run.env.SLUICE_API_KEY).toBe(sluice.apiKeyFromFile());
      expect(run.env.ROOT).toBe(sluice.baseUrl.replace(/\/v1$/, ""));
    },
    "Quick start #3": (run) => {
      const [workspace, projects, openapi] = run.lines.map(json);
      expect(workspace.data.id).toMatch(/^o_/);
      expect(projects.data).toEqual([{ id: expect.stringMatching(/^proj_/), name: "Default project" }]);
      expect(openapi.openapi).toBe("3.1.0");
    },
    "Your first source #1": (run) => {
      const [created, answer, latest, ticks, updated, logs] = run.lines.map(json);
      expect(created).toEqual(readJson(cwd, "created.json"));
      expect(created.data.configured_props).toMatchObject({ greeting: "Hi", timer: { interval_seconds: 1 } });
      expect(created.data.configured_props).not.toHaveProperty("token");
      expect(answer).toEqual({ message: "Hi, Ada!", visits: 1 });
      expect(latest.data[0].event).toEqual({ name: "Ada" });
      expect(latest.data[0].metadata.summary).toBe("visit 1");
      expect(ticks.data[0].metadata.name).toBe("ticks");
      expect(updated.data.id).toBe(created.data.id);
      expect(updated.data.configured_props.greeting).toBe("Howdy");
      expect(updated.data.configured_props).not.toHaveProperty("token");
      const lines = logs.data.map((event: { event: { message: string } }) => event.event.message).reverse();
      expect(lines).toEqual(["deploy", "activate", "deactivate", "activate"]);
    },
    "Your first workflow #1": async (run) => {
      const [created, answer, runs, events] = run.lines.map(json);
      expect(created).toEqual(readJson(cwd, "workflow-created.json"));
      expect(created.data).toMatchObject({ id: expect.stringMatching(/^p_/), name: "Orders", active: true });
      expect(created.data.steps.map((step: { namespace: string }) => step.namespace)).toEqual(["parse", "reply"]);
      expect(created.data.triggers[0]).toMatchObject({ custom_response: true });
      expect(answer).toEqual({ message: "Thanks, Ada!", total: 7 });
      expect(runs.page_info.total_count).toBe(1);
      expect(runs.data[0]).toMatchObject({ workflow_id: created.data.id, status: "success", error: null });
      expect(
        runs.data[0].steps.map((step: { status: string; summary: string | null }) => [step.status, step.summary]),
      ).toEqual([
        ["success", "2 items for Ada"],
        ["success", null],
      ]);
      expect(events.data.map((event: { event: unknown }) => event.event)).toEqual([
        { raw_event: { name: "Ada", total: 7 } },
      ]);
      expect((await api("GET", `/workflows/${created.data.id}/$errors/event_summaries`)).json.data).toEqual([]);
    },
    "Pausing for an approval #1": (run) => {
      const [answer, resumed] = run.lines.map(json);
      expect(answer).toEqual({ success: true });
      expect(resumed).toMatchObject({ status: "resumed", run_id: expect.stringMatching(/^run_/) });
      const runs = readJson(cwd, "approval-runs.json").data;
      expect(runs.map((r: { status: string }) => r.status)).toEqual(["success", "paused"]);
      expect(runs[0].resumed_from).toBe(resumed.run_id);
      expect(runs[1]).toMatchObject({ id: resumed.run_id, pause: { kind: "suspend" } });
      expect(runs[0].steps).toEqual([
        expect.objectContaining({ namespace: "ship", summary: "order shipped, approved by Grace" }),
      ]);
    },
    "Running an action on its own #1": (run) => {
      expect(run.lines.map(json)).toEqual([
        {
          exports: { $summary: "Greeted Ada" },
          os: [{ k: "console.log", msg: "greeting Ada", ts: expect.any(Number) }],
          ret: "Hello, Ada!",
        },
      ]);
    },
    "Keeping files: File Stores #1": (run) => {
      expect(run.lines).toEqual(["notes/latest.txt (8 bytes)", "buy milk"]);
      const [project] = readdirSync(join(cwd, ".sluice", "file-stores")).filter((name) => name.startsWith("proj_"));
      expect(readFileSync(join(cwd, ".sluice", "file-stores", project as string, "notes", "latest.txt"), "utf8")).toBe(
        "buy milk",
      );
    },
    "Events: history, deletion, live stream #1": async (run) => {
      const sourceId = readJson(cwd, "created.json").data.id;
      const page = json(run.lines[0]);
      const ids: string[] = page.data.map((event: { id: string }) => event.id);
      expect(ids.length).toBeGreaterThan(0);
      const [first, last] = [ids.at(-1), ids[0]];
      // The live stream resumed after the first of them: the others again, then what came since.
      const stream = run.lines.slice(1, -1);
      expect(stream).toContain("retry: 1000");
      expect(stream).toContain("event: ticks");
      const streamed = stream.filter((line) => line.startsWith("id: ")).map((line) => line.slice(4));
      expect(streamed.length).toBeGreaterThan(0);
      const position = (id: string) => id.split("-").map(Number) as [number, number];
      for (const [earlier, later] of streamed.slice(1).map((id, k) => [streamed[k] ?? "", id] as const)) {
        const [[ms1, n1], [ms2, n2]] = [position(earlier), position(later)];
        expect(ms2 > ms1 || (ms2 === ms1 && n2 > n1), `${later} after ${earlier}`).toBe(true);
      }
      expect(streamed).toEqual(
        ids
          .slice(0, -1)
          .reverse()
          .concat(streamed.slice(ids.length - 1)),
      );
      expect(json(run.lines.at(-1))).toEqual({
        data: { source_id: sourceId, start_id: first, end_id: last, event_name: "ticks" },
      });
      const left = await api("GET", `/sources/${sourceId}/event_summaries?event_name=ticks&limit=100`);
      expect(left.json.data.map((event: { id: string }) => event.id)).not.toContain(first);
      expect(left.json.data.map((event: { id: string }) => event.id)).not.toContain(last);
    },
    "Subscriptions and webhooks #1": async (run) => {
      const sourceId = readJson(cwd, "created.json").data.id;
      const [webhook, one, all] = run.lines.map(json);
      expect(webhook.data).toMatchObject({ id: expect.stringMatching(/^wh_/), url: "http://127.0.0.1:8080/hook" });
      expect(webhook.data.signing_secret).toMatch(/^whsec_/);
      expect(one.data).toMatchObject({ emitter_id: sourceId, listener_id: webhook.data.id, event_name: "" });
      expect(all.data).toMatchObject({ emitter_id: "dc_*", listener_id: webhook.data.id, event_name: "$errors" });
      const listed = await api("GET", "/users/me/subscriptions");
      expect(listed.json.data.map((sub: { id: string }) => sub.id).sort()).toEqual([one.data.id, all.data.id].sort());
    },
    "Cleaning up #1": async (run) => {
      const [webhookDeleted, sourceDeleted, workflowDeleted, endpointStatus, approvalsDeleted] = run.lines;
      expect(json(webhookDeleted).data).toEqual({ id: expect.stringMatching(/^wh_/), deleted: true });
      const sourceId = json(sourceDeleted).data.id;
      expect(json(sourceDeleted).data).toEqual({ id: expect.stringMatching(/^dc_/), deleted: true });
      expect(json(workflowDeleted).data).toEqual({ id: expect.stringMatching(/^p_/), deleted: true });
      expect((await api("GET", `/workflows/${json(workflowDeleted).data.id}`)).status).toBe(404);
      expect(endpointStatus).toBe("404");
      expect(json(approvalsDeleted).data).toEqual({ id: expect.stringMatching(/^p_/), deleted: true });
      expect((await api("GET", "/users/me/workflows")).json.data).toEqual([]);
      expect((await api("GET", `/sources/${sourceId}`)).status).toBe(404);
      expect((await api("GET", "/users/me/subscriptions")).json.data).toEqual([]);
      // The files the examples wrote are gone too; only the data dir is left.
      for (const file of [
        "hello.mjs",
        "source.json",
        "created.json",
        "ticks.json",
        "webhook.json",
        "parse.mjs",
        "reply.mjs",
        "workflow.json",
        "workflow-created.json",
        "ask.mjs",
        "ship.mjs",
        "approval.json",
        "approval-created.json",
        "approval-events.json",
        "approval-runs.json",
        "greet.mjs",
        "greet.json",
        "note.mjs",
        "note.json",
        "note-run.json",
      ])
        expect(existsSync(join(cwd, file))).toBe(false);
      // The note the File Store example kept is deleted too, with its folder.
      const stores = join(cwd, ".sluice", "file-stores");
      for (const project of readdirSync(stores).filter((name) => name.startsWith("proj_"))) {
        expect(readdirSync(join(stores, project))).toEqual([]);
      }
    },
    "Connect an account #1": async (run) => {
      const [app, created, full, updated, listed] = run.lines.map(json);
      expect(app.data).toMatchObject({ name_slug: "postgresql", auth_type: "keys" });
      expect(created).toEqual(readJson(cwd, "account.json"));
      expect(created.data).toMatchObject({ id: expect.stringMatching(/^apn_/), name: "Local Postgres", healthy: true });
      expect(created.data).not.toHaveProperty("credentials");
      expect(full.data.credentials).toEqual({
        host: "127.0.0.1",
        port: 5432,
        user: "postgres",
        password: "change-me",
        database: "postgres",
      });
      expect(updated.data.id).toBe(created.data.id);
      const read = await api("GET", `/accounts/${created.data.id}?include_credentials=1`);
      expect(read.json.data.credentials.password).toBe("changed");
      expect(listed.data).toEqual([{ id: created.data.id, name: "Local Postgres" }]);
    },
    "Connect an account #2": async (run) => {
      const deleted = json(run.lines[0]);
      expect(deleted.data).toEqual({ id: expect.stringMatching(/^apn_/), deleted: true });
      expect((await api("GET", `/accounts/${deleted.data.id}`)).status).toBe(404);
      expect(existsSync(join(cwd, "account.json"))).toBe(false);
    },
    "Connect an OAuth app #1": async (run) => {
      const [started, tested] = run.lines.map(json);
      expect(started.data.authorize_url.startsWith(`${provider.origin}/authorize?`)).toBe(true);
      expect(started.data.redirect_uri).toBe(`${sluice.baseUrl}/accounts/oauth/callback`);
      expect(provider.tokenRequests).toEqual(["authorization_code"]);
      expect(tested.data).toMatchObject({ id: expect.stringMatching(/^apn_/), name: "My Acme", healthy: true });
      expect(tested.data.app.name).toBe("Stand-in");
      for (const file of ["connect.json", "connected.html"]) expect(existsSync(join(cwd, file))).toBe(false);
    },
    "The sluice command line #2": async (run) => {
      const profile = join(run.env.XDG_CONFIG_HOME ?? "", "sluice", "config.json");
      expect(run.lines[0]).toBe(
        `Logged in to ${sluice.baseUrl.replace(/\/v1$/, "")} as sluice; profile "default" saved in ${profile}`,
      );
      expect(run.stdout).not.toContain(sluice.apiKeyFromFile());
      expect(statSync(profile).mode & 0o777).toBe(0o600);
      const source = readJson(cwd, "greet.json");
      greetId = source.id;
      expect(source.configured_props.greeting).toBe("Hi");
      expect(run.lines.slice(1).map(json)).toEqual([{ message: "Hi, Ada!" }]);
    },
    "The sluice command line #3": (run) => {
      const [header, row] = run.lines;
      expect(header).toMatch(/^ID\s+NAME\s+ACTIVE\s+CREATED\s+ENDPOINT$/);
      expect(row).toMatch(new RegExp(`^${greetId}\\s+greet\\s+true\\s`));
      const rest = run.lines.slice(2);
      expect(rest[0]).toMatch(/Z {2}default {2}\{"name":"Ada"\}$/);
      expect(rest.slice(1).some((line) => / {2}log {4}greeting Ada$/.test(line))).toBe(true);
    },
    "The sluice command line #4": (run) => {
      expect(run.lines.map((line) => line.replace(/^\S+ {2}/, ""))).toEqual([
        'default  {"name":"Ada"}',
        'default  {"name":"Grace"}',
      ]);
    },
    "The sluice command line #5": async (run) => {
      // greet.json is gone by now (the block removed it): the id the deploy block read.
      const id = greetId;
      expect(run.lines[0]).toBe(`Updated source "greet" (${id})`);
      expect(run.lines[1]).toMatch(/^ {2}endpoint: http/);
      expect(json(run.lines[2])).toEqual({ message: "Hi and welcome, Ada!" });
      expect(run.lines[3]).toBe(`Deleted source ${id}`);
      expect((await api("GET", `/sources/${id}`)).status).toBe(404);
      for (const file of ["greet.mjs", "greet.mjs.bak", "greet.json"]) expect(existsSync(join(cwd, file))).toBe(false);
    },
    "The sluice command line #7": (run) => {
      // Into the default registry directory, the data dir the running Sluice serves.
      expect(run.lines[0]).toBe(
        "Added @pipedream/helper_functions 0.3.13 in .sluice/registry/helper_functions: 24 component(s) with a key",
      );
      expect(npm.tarballRequests("@pipedream/helper_functions")).toBe(1);
      expect(json(run.lines.at(-1)).data).toMatchObject({ key: "helper_functions-prettify-json" });
    },
  };

  it("has a check only for blocks that exist, and runs some of every usage section", () => {
    const names = BLOCKS.map((block) => block.name);
    for (const name of Object.keys(checks)) expect(names).toContain(name);
    const run = BLOCKS.filter((block) => !block.skip).map((block) => block.name.replace(/ #\d+$/, ""));
    expect(new Set(run)).toEqual(
      new Set([
        "Quick start",
        "Your first source",
        "Your first workflow",
        "Pausing for an approval",
        "Running an action on its own",
        "Keeping files: File Stores",
        "Events: history, deletion, live stream",
        "Subscriptions and webhooks",
        "Cleaning up",
        "Connect an account",
        "Connect an OAuth app",
        "The sluice command line",
      ]),
    );
  });

  /** The Quick start installs and checks exactly as .ci/run does, and starts Sluice as this test does. */
  const quickStartIsWhatCiRuns = () => {
    const commands = BLOCKS.filter((block) => block.name.startsWith("Quick start #") && block.skip).flatMap((block) =>
      block.script.trim().split("\n"),
    );
    const ci = readFileSync(join(REPO_ROOT, ".ci/run"), "utf8")
      .split("\n")
      .filter((line) => line.startsWith("npm "));
    expect(commands.filter((line) => line !== "npm start")).toEqual(ci);
    expect(commands).toContain("npm start");
    // startSluice runs `node bin/sluice.mjs start`, which is what `npm start` runs.
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
    expect(pkg.scripts.start).toBe("node bin/sluice.mjs start");
  };

  it("quotes in its Quick start what a start on a taken port prints", async () => {
    const quickStart = README.slice(
      README.indexOf("## Quick start"),
      README.indexOf("\n## ", README.indexOf("## Quick start")),
    );
    const quoted = /`(sluice: listen EADDRINUSE[^`]*127\.0\.0\.1:4000)`/.exec(quickStart)?.[1];
    expect(quoted).toBeDefined();
    // Another data dir, so that the port is what stops it (a second server on one data dir is refused first).
    const port = new URL(sluice.baseUrl).port;
    const second = runSluice(["start"], { PORT: port, SLUICE_DATA_DIR: mkdtempSync(join(tmpdir(), "sluice-readme-")) });
    await expect(second).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining(quoted?.replace(":4000", `:${port}`) ?? "(no quote)"),
    });
  });

  /**
   * What stands in for each block this test does not run: its marker says why not, and this
   * checks that the stand-in the marker names is still there, so a skipped block is never a claim
   * nobody checks. A skipped block without an entry fails.
   */
  const standIns: Record<string, () => void> = {
    // `npm link` puts package.json's `bin` on the PATH: the terminal here has the same link first.
    "The sluice command line #1": () => {
      const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
      expect(join(REPO_ROOT, pkg.bin.sluice)).toBe(SLUICE_BIN);
      expect(readFileSync(SLUICE_BIN, "utf8").startsWith("#!/usr/bin/env node\n")).toBe(true);
      expect(statSync(SLUICE_BIN).mode & 0o111).not.toBe(0);
      const first = (env.PATH ?? "").split(":")[0] ?? "";
      expect(realpathSync(join(first, "sluice"))).toBe(realpathSync(SLUICE_BIN));
    },
  };
  for (const block of BLOCKS)
    if (block.skip && block.name.startsWith("Quick start #")) standIns[block.name] = quickStartIsWhatCiRuns;
  // `sluice dev` runs until Ctrl-C: cli-commands.test.ts runs it on a file with --prop, edits it and stops it.
  const devBlock = BLOCKS.find((block) => block.skip && block.script.startsWith("sluice dev "));
  if (devBlock)
    standIns[devBlock.name] = () => {
      expect(devBlock.script.trim()).toMatch(/^sluice dev \S+\.mjs --prop \w+=\S+$/);
      const cliTest = readFileSync(join(REPO_ROOT, "test/e2e/cli-commands.test.ts"), "utf8");
      expect(cliTest).toMatch(/spawnSluiceBin\(\["dev", file, "--prop", /);
    };

  for (const block of BLOCKS) {
    if (block.skip) {
      it(`${block.name}: not run (${block.skip}); its stand-in is checked`, () => {
        const standIn = standIns[block.name];
        expect(standIn, `no stand-in check for the skipped block ${block.name}`).toBeDefined();
        standIn?.();
      });
      continue;
    }
    it(`${block.name} runs as written`, async () => {
      const run = await runBlock(block.script, cwd, env);
      env = run.env;
      await checks[block.name]?.(run);
    });
  }
});

describe("the rule that skips a README block", () => {
  const marker = "<!-- not run by test/e2e/readme.test.ts: needs an AWS account -->";

  it("skips the shell block right after a marker, with the marker's reason, and runs the others", () => {
    const markdown = ["## Deploy", marker, "```sh", "npx cdk deploy --all", "```", "```bash", "echo hi", "```", ""];
    expect(shellBlocks(markdown.join("\n"))).toEqual([
      { name: "Deploy #1", script: "npx cdk deploy --all\n", skip: "needs an AWS account" },
      { name: "Deploy #2", script: "echo hi\n" },
    ]);
  });

  it("refuses a marker without a reason, and one that skips no shell block", () => {
    const refused =
      (...lines: string[]) =>
      () =>
        shellBlocks(["## Deploy", ...lines].join("\n"));
    expect(refused("<!-- not run by test/e2e/readme.test.ts:  -->", "```sh", "echo hi", "```")).toThrow(/reason/);
    expect(refused("<!-- not run by test/e2e/readme.test.ts -->", "```sh", "echo hi", "```")).toThrow(/reason/);
    expect(refused(marker, "", "```sh", "npx cdk deploy --all", "```")).toThrow(/right before/);
    expect(refused(marker, "```js", "deploy()", "```")).toThrow(/right before/);
  });
});
