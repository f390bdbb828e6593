/**
 * `npx tsx bench/accounts-cost.ts [runs]`: what a connected account costs a source's run on the
 * trusted side (issue 17, docs/benchmarks.md "Accounts in components"). Two sources on the local
 * stores (SQLite in memory) and a host that runs no code, so only Sluice's own work is timed: one
 * with an HTTP interface only, one with an app prop configured with an account too (its record
 * read and its credentials opened with the local AES-GCM key at every run). Runs of the two
 * alternate, so load on the machine falls on both alike. Prints the median and p99 of a whole run
 * (build, invoke, apply) of each, and of `bindAccounts` alone.
 */
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { sealCredentials } from "#core/account-credentials";
import { bindAccounts } from "#core/app-accounts";
import { runSource } from "#core/source-runs";
import { deploySource } from "#core/sources";
import { accountIn, memoryDeps, scriptedHost } from "../test/support/memory-deps.ts";

const runs = Number(process.argv[2] ?? 3000);
const GITHUB = { name: "github", type: "app", app: "github", authFields: ["api_key"] };
const HTTP = { name: "http", type: "$.interface.http" };

async function sourceWith(props: object[], configured: Record<string, unknown>) {
  const { host } = scriptedHost({ props: props as never });
  const deps = memoryDeps(Date.now(), {
    host,
    runs: { enqueue: async () => {} },
    timers: { schedule: async () => {}, cancel: async () => {} },
    registry: { readCode: async () => undefined, readTemplate: async () => undefined },
    fetcher: { fetchCode: async () => "" },
  });
  const owner = await accountIn(deps, "bench");
  const now = deps.clock.nowMs();
  const account = {
    id: "apn_01jd00000000000000000bench",
    workspaceId: owner.workspace.id,
    ownerId: owner.user.id,
    app: "github",
    name: "bench",
    sealedCredentials: await sealCredentials(deps, { api_key: "sk_bench_0123456789abcdef" }),
    healthy: true,
    createdAt: now,
    updatedAt: now,
    version: 1,
  };
  await deps.appAccounts.create(account);
  const values = JSON.parse(JSON.stringify(configured).replaceAll("$ACCOUNT", account.id));
  const source = await deploySource(deps, { userId: owner.user.id }, { component_code: "x", configured_props: values });
  return { deps, source, account, workspaceId: owner.workspace.id };
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
const summary = (samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return `median ${(percentile(sorted, 50) * 1000).toFixed(0)} µs, p99 ${(percentile(sorted, 99) * 1000).toFixed(0)} µs`;
};

const plain = await sourceWith([HTTP], {});
const withAccount = await sourceWith([HTTP, GITHUB], { github: { authProvisionId: "$ACCOUNT" } });
const times = { plain: [] as number[], account: [] as number[], bind: [] as number[] };
for (let i = 0; i < runs + 200; i++) {
  for (const [name, setup] of [
    ["plain", plain],
    ["account", withAccount],
  ] as const) {
    const started = performance.now();
    await runSource(setup.deps, { sourceId: setup.source.id, trigger: "http", event: {} });
    if (i >= 200) times[name].push(performance.now() - started);
  }
  const started = performance.now();
  await bindAccounts(
    withAccount.deps,
    withAccount.workspaceId,
    [GITHUB],
    { github: { authProvisionId: withAccount.account.id } },
    30_000,
  );
  if (i >= 200) times.bind.push(performance.now() - started);
}
process.stdout.write(
  [
    `${runs} runs each after 200 warm-up, load average ${loadavg()
      .map((n) => n.toFixed(1))
      .join(" ")}`,
    `run, no account prop:     ${summary(times.plain)}`,
    `run, app prop + account:  ${summary(times.account)}`,
    `bindAccounts alone:       ${summary(times.bind)}`,
    "",
  ].join("\n"),
);
