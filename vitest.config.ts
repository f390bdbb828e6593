import { defineConfig } from "vitest/config";

/** Test files that talk to DynamoDB Local: only their project starts the JVM (test/support/global-setup.ts). */
const NEEDS_DYNAMODB = [
  "test/contract/stores.test.ts",
  "test/contract/subscription-stores.test.ts",
  "test/contract/source-run-locks.test.ts",
  "test/contract/workflow-stores.test.ts",
  "test/contract/data-store-stores.test.ts",
  "test/contract/delayed-emit-stores.test.ts",
  "test/contract/paused-run-stores.test.ts",
  "test/contract/app-account-stores.test.ts",
  "test/integration/aws-source-stream.test.ts",
  "test/e2e/cli.test.ts",
  "test/integration/lambda-entry.test.ts",
];

const shared = { testTimeout: 30_000, hookTimeout: 60_000, pool: "forks" as const };

export default defineConfig({
  test: {
    // `npm test` runs the unit project with coverage first: a report of core and the runtime layer
    // (the code both platforms share), with a floor at the level they had when it was set (issue 13).
    coverage: {
      provider: "v8",
      include: ["functions/core/**/*.ts", "runtime-layer/**/*.ts"],
      reporter: ["text-summary", "json-summary"],
      reportsDirectory: "coverage",
      thresholds: { statements: 86, branches: 83, functions: 86, lines: 87 },
    },
    projects: [
      // Unit files share their worker's modules (no isolation): they start no server and keep no
      // global state between files, and the run takes a third of the time.
      // Their temporary folders (CLI homes, lock files, registry trees) go under one removed at the end.
      {
        test: {
          ...shared,
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          isolate: false,
          globalSetup: ["test/support/temp-root.ts"],
        },
      },
      {
        test: {
          ...shared,
          name: "integration",
          // Two files at a time although the machine has two cores (vitest's default is one fewer
          // than the cores): most of these files wait on child processes, servers and timers, and
          // one at a time the project took over 13 minutes (decision 331).
          maxWorkers: 2,
          globalSetup: ["test/support/temp-root.ts"],
          include: ["test/**/*.test.ts"],
          exclude: ["test/unit/**", "test/aws-offline/**", "test/aws-live/**", ...NEEDS_DYNAMODB],
        },
      },
      {
        test: {
          ...shared,
          name: "dynamodb",
          include: NEEDS_DYNAMODB,
          globalSetup: ["test/support/global-setup.ts", "test/support/temp-root.ts"],
          // As the integration project: vitest runs the two in one group, which needs one setting.
          maxWorkers: 2,
        },
      },
      {
        // `npm run test:aws`: the stacks deployed into moto and driven offline (docs/aws.md).
        test: {
          ...shared,
          name: "aws-offline",
          include: ["test/aws-offline/**/*.test.ts"],
          globalSetup: ["test/support/temp-root.ts"],
        },
      },
      {
        // `npm run test:aws-live` (test/aws-live/run.ts): the same flow against a real account.
        test: { ...shared, name: "aws-live", include: ["test/aws-live/**/*.test.ts"] },
      },
    ],
  },
});
