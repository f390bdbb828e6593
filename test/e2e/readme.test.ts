import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, type SluiceProcess, startSluice } from "../support/local-process.ts";

const run = promisify(execFile);

/** The shell blocks of the README's quick start that talk to the running service. */
function quickStartCommands(): string[] {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const quickStart = readme.slice(readme.indexOf("## Quick start"), readme.indexOf("### Settings"));
  const blocks = [...quickStart.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  return blocks.filter((block) => block.includes("curl")).flatMap((block) => block.trim().split("\n"));
}

/** The shell block of the README's "Your first source" section, as one script. */
function firstSourceScript(): string {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Your first source"), readme.indexOf("## Errors"));
  return /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
}

describe("the README's quick start", () => {
  let sluice: SluiceProcess;

  beforeAll(async () => {
    sluice = await startSluice();
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("has curl examples, and each works as written against a fresh local mode", async () => {
    const commands = quickStartCommands();
    expect(commands.filter((c) => c.startsWith("curl")).length).toBeGreaterThanOrEqual(4);
    // As written, except for the port and data dir of this test's server; one shell, as a user types them.
    const script = commands
      .map((command) =>
        command
          .replaceAll("http://127.0.0.1:4000", sluice.baseUrl.replace(/\/v1$/, ""))
          .replaceAll(".sluice/api-key", join(sluice.dataDir, "api-key")),
      )
      .map((command) => (command.startsWith("curl") ? `${command}; echo` : command))
      .join("\n");
    const { stdout } = await run("bash", ["-euo", "pipefail", "-c", script], { cwd: REPO_ROOT });
    const answers = stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(answers[0].data.username).toBe("sluice");
    expect(answers[1].data.id).toMatch(/^o_/);
    expect(answers[2].data).toEqual([{ id: expect.stringMatching(/^proj_/), name: "Default project" }]);
    expect(answers[3].openapi).toBe("3.1.0");
  });

  it("has a first source that deploys, answers, fires its timer, lists events and runs the hooks in order", async () => {
    const script = firstSourceScript()
      .replaceAll("http://127.0.0.1:4000", sluice.baseUrl.replace(/\/v1$/, ""))
      .split("\n")
      .map((line) => (line.startsWith("curl") ? `${line}; echo` : line))
      .join("\n");
    expect(script).toContain("/v1/sources");
    const cwd = mkdtempSync(join(tmpdir(), "sluice-readme-"));
    const { stdout } = await run("bash", ["-euo", "pipefail", "-c", script], {
      cwd,
      env: { ...process.env, SLUICE_API_KEY: sluice.apiKeyFromFile() },
    });
    const [answer, latest, ticks, updated, logs, deleted] = stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(answer).toEqual({ message: "Hi, Ada!", visits: 1 });
    expect(latest.data[0].event).toEqual({ name: "Ada" });
    expect(latest.data[0].metadata.summary).toBe("visit 1");
    expect(ticks.data[0].metadata.name).toBe("ticks");
    expect(updated.data.configured_props.greeting).toBe("Howdy");
    expect(updated.data.configured_props).not.toHaveProperty("token");
    const lines = logs.data.map((event: { event: { message: string } }) => event.event.message).reverse();
    expect(lines).toEqual(["deploy", "activate", "deactivate", "activate"]);
    expect(deleted.data).toEqual({ id: updated.data.id, deleted: true });
    const created = JSON.parse(readFileSync(join(cwd, "created.json"), "utf8"));
    expect((await fetch(created.data.configured_props.http.endpoint_url, { method: "POST" })).status).toBe(404);
  });
});
