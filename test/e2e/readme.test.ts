import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
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
});
