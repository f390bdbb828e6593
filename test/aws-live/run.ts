/**
 * `npm run test:aws-live`: says why it skips without AWS credentials (and exits 0), refuses an
 * incomplete configuration naming each problem (exit 1), and otherwise runs the live suite
 * (vitest's `aws-live` project) and exits as it does.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { REPO_ROOT } from "../support/local-process.ts";
import { LIVE_ENV, liveConfig } from "./live-config.ts";

export interface LiveRun {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly write: (line: string) => void;
  /** Runs the suite; its exit code. */
  readonly runSuite: () => number;
}

/** What `npm run test:aws-live` does, to its exit code. */
export function runLive({ env, write, runSuite }: LiveRun): number {
  const config = liveConfig(env);
  if (config.kind === "skip") {
    write(`test:aws-live skipped: ${config.reason}. See docs/aws.md, "The live test".`);
    return 0;
  }
  if (config.kind === "invalid") {
    write("test:aws-live cannot run: AWS credentials are set, but");
    for (const problem of config.problems) write(`  - ${problem}`);
    write(
      `Set ${Object.values(LIVE_ENV).join(", ")} as docs/aws.md "The live test" says, or unset the credentials to skip.`,
    );
    return 1;
  }
  const { serviceStack, receiverUrl, receiverPort } = config.settings;
  write(`test:aws-live: against ${serviceStack}, receiver ${receiverUrl} -> 127.0.0.1:${receiverPort}`);
  return runSuite();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.exitCode = runLive({
    env: process.env,
    write: (line) => process.stdout.write(`${line}\n`),
    runSuite: () =>
      spawnSync(process.execPath, [join(REPO_ROOT, "node_modules/vitest/vitest.mjs"), "run", "--project", "aws-live"], {
        cwd: REPO_ROOT,
        stdio: "inherit",
      }).status ?? 1,
  });
}
