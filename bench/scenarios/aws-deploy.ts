/**
 * The deploying routes on warm Lambda functions, offline (docs/aws.md "Deploy time budget"): both
 * stacks deployed into moto as the offline deployment test deploys them
 * (`test/aws-offline/offline-stack.ts`), the route functions' own bundles run on Node 22 by the
 * local Lambda in warm mode (one process per function, kept between requests), components whose
 * npm packages come from a stand-in registry on 127.0.0.1 and whose installed trees go to moto's
 * S3. Issue 16's goal: `POST /v1/sources`, `PUT /v1/sources/{id}` and `POST /v1/components`
 * within 10 s at p99 for a component with npm dependencies on a warm function.
 */
import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import type { IConstruct } from "constructs";
import type { OfflineStack } from "../../test/aws-offline/offline-stack.ts";
import { type ApiAnswer, apiClient } from "../../test/support/api-client.ts";
import { REPO_ROOT } from "../../test/support/local-process.ts";
import { remapBundleProfile } from "../lib/bundle-profile.ts";
import { monoMs } from "../lib/clock.ts";
import { ms } from "../lib/common.ts";
import { type CpuProfile, selfTime } from "../lib/cpu-profile.ts";
import { descendantsOf, parseStat } from "../lib/proc.ts";
import { type Row, renderProfile } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { roundAll, summarize } from "../lib/stats.ts";

const run = promisify(execFile);

/** Issue 16's bound for each deploying route, at p99, on a warm function. */
const TARGET_MS = 10_000;

/** The routes measured, by their name in the route manifest. */
const ROUTES = ["create-source", "update-source", "create-component"] as const;
type RouteName = (typeof ROUTES)[number];

const LABELS: Record<RouteName, string> = {
  "create-source": "POST /v1/sources",
  "update-source": "PUT /v1/sources/{id}",
  "create-component": "POST /v1/components",
};

/** What the first request of a route with the dependency set had to do. */
const FIRST: Record<RouteName, string> = {
  "create-source": "first, cold cache: npm install, tree stored in S3",
  "update-source": "first in its environment: tree unpacked from S3",
  "create-component": "first in its environment: npm install (no bucket)",
};

/**
 * A polling source in the shape of the public registry's: `@pipedream/platform`'s axios (shipped
 * with Sluice: no install) and `form-data` (not shipped: installed from the registry, with its
 * dependencies about 25 packages), a timer, a prop, no hooks. Every index gives different code and
 * a different key, with the same dependency set.
 */
export const formUploadCode = (index: number) => `// bench aws-deploy ${index} ${Math.random()}
import { axios } from "@pipedream/platform";
import FormData from "form-data";

export default {
  key: "bench-form-upload-${index}",
  name: "Bench form upload ${index}",
  version: "0.0.1",
  type: "source",
  props: {
    timer: { type: "$.interface.timer", default: { intervalSeconds: 900 } },
    url: { type: "string", label: "Upload URL", default: "https://example.com/upload" },
  },
  methods: {
    async upload(body) {
      const form = new FormData();
      form.append("payload", JSON.stringify(body));
      return axios(this, { method: "POST", url: this.url, data: form, headers: form.getHeaders() });
    },
  },
  async run() {
    this.$emit({ n: ${index}, at: Date.now() }, { id: String(Date.now()), summary: "tick ${index}" });
  },
};
`;

/** Code without npm imports, to start each route's environment before the measured requests. */
const plainCode = (index: number) => `// bench aws-deploy warm-up ${index} ${Math.random()}
export default {
  key: "bench-warm-up-${index}",
  name: "Bench warm-up ${index}",
  version: "0.0.1",
  type: "source",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 900 } } },
  async run() {
    this.$emit({ n: ${index} });
  },
};
`;

/** The stand-in registry's packages: `form-data` and what it depends on, from Sluice's own node_modules. */
async function registryPackages() {
  const { installedPackages } = await import("../../test/support/npm-registry-fixture.ts");
  const nodeModules = join(REPO_ROOT, "node_modules");
  return [
    ...installedPackages(nodeModules, ["form-data"]),
    // form-data wants mime-types 2, which npm put under form-data's own node_modules.
    ...installedPackages(join(nodeModules, "form-data", "node_modules"), ["mime-types"]),
  ];
}

/** One measured request. */
interface Sample {
  ms: number;
  /** The request's window on the monotonic clock, in µs (a profile's clock). */
  window: [number, number];
  /** CPU of the route's environment (its process and children, reaped ones included). */
  cpuMs: number;
  /** Wall time in the describer's invocations. */
  describerMs: number;
  /** Wall time in Lambda API calls (create, update, read a function), moto answering. */
  lambdaApiMs: number;
  registryRequests: number;
  tarballs: number;
}

/**
 * CPU ms of the process tree under `root`: every live process's user and system time, plus the
 * time of children they reaped (npm's runs, which end before the request does).
 */
async function treeCpuMs(root: number): Promise<number> {
  const lines = new Map<number, string>();
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      lines.set(Number(name), await readFile(`/proc/${name}/stat`, "utf8"));
    } catch {}
  }
  const stats = [...lines.values()].map(parseStat);
  let ticks = 0;
  for (const pid of descendantsOf(root, stats)) {
    const text = lines.get(pid) ?? "";
    const fields = text
      .slice(text.lastIndexOf(")") + 1)
      .trim()
      .split(/\s+/);
    // utime(14) stime(15) cutime(16) cstime(17), counted from field 3.
    for (const field of [14, 15, 16, 17]) ticks += Number(fields[field - 3] ?? 0);
  }
  return ticks * 10;
}

/**
 * With `--profile`: each route function's environment is ended (so that Node writes its profile),
 * and its profile, mapped back to the sources through the bundle's source map, is ranked over the
 * warm requests (the first request of each route and the warm-ups left out).
 */
async function routeProfiles(
  offline: OfflineStack,
  functionOf: (route: RouteName) => string,
  samples: Record<RouteName, Sample[]>,
  profileDir: string,
): Promise<Partial<Record<RouteName, ReturnType<typeof selfTime>>>> {
  const pids = new Map(ROUTES.map((route) => [route, offline.lambda.environmentPids(functionOf(route))[0]]));
  await offline.lambda.endEnvironments();
  const files = readdirSync(profileDir);
  const ranked: Partial<Record<RouteName, ReturnType<typeof selfTime>>> = {};
  for (const route of ROUTES) {
    const file = files.find((name) => name.endsWith(".cpuprofile") && name.includes(`.${pids.get(route)}.`));
    if (!file) continue;
    const profile = remapBundleProfile(JSON.parse(readFileSync(join(profileDir, file), "utf8")) as CpuProfile);
    ranked[route] = selfTime(profile, {
      windows: samples[route].slice(1).map((sample) => sample.window),
      repoRoot: REPO_ROOT,
    });
  }
  return ranked;
}

const rows = (figures: Partial<Record<string, number>> = {}): Row[] =>
  ROUTES.flatMap((route): Row[] => [
    {
      scenario: "aws-deploy",
      figure: `${LABELS[route]}, ${FIRST[route]}`,
      measured: figures[`${route}.first`],
      unit: "ms",
      target: { kind: "atMost", value: TARGET_MS },
    },
    {
      scenario: "aws-deploy",
      figure: `${LABELS[route]}, warm function and cache, p50`,
      measured: figures[`${route}.p50`],
      unit: "ms",
    },
    {
      scenario: "aws-deploy",
      figure: `${LABELS[route]}, warm function and cache, p99`,
      measured: figures[`${route}.p99`],
      unit: "ms",
      target: { kind: "atMost", value: TARGET_MS },
    },
  ]);

export const awsDeploy: Scenario = {
  name: "aws-deploy",
  title:
    "POST /v1/sources, PUT /v1/sources/{id}, POST /v1/components with npm packages, on warm route functions deployed into moto",
  optIn: "needs moto and boto3: pip install 'moto[server]==5.2.1' boto3, as npm run test:aws",
  deadlineMs: 30 * 60_000,
  quickDeadlineMs: 15 * 60_000,
  emptyRows: () => rows(),
  async run(context) {
    const count = context.pick(20, 3);
    try {
      await run("python3", ["-c", "import moto, boto3"]);
    } catch {
      throw new Error(`moto is not installed: ${awsDeploy.optIn}`);
    }
    // The harness (the CDK app, the SDK, moto's modules) loads only when this scenario runs.
    const [{ startOfflineStack }, { MOTO_CREDENTIALS, MOTO_REGION }, { STATEFUL_STACK }, { createUserInTable }] =
      await Promise.all([
        import("../../test/aws-offline/offline-stack.ts"),
        import("../../test/aws-offline/moto.ts"),
        import("../../test/aws-offline/templates.ts"),
        import("../../test/support/aws-flow.ts"),
      ]);
    const { startNpmRegistry } = await import("../../test/support/npm-registry-fixture.ts");
    const { ListObjectsV2Command, S3Client } = await import("@aws-sdk/client-s3");
    const packages = await registryPackages();
    const registry = await startNpmRegistry(packages);
    context.defer(() => registry.close());
    context.log("synthesizing, bundling and deploying both stacks into moto");
    const setUpStarted = performance.now();
    if (context.profile) {
      rmSync(context.profileDir, { recursive: true, force: true });
      mkdirSync(context.profileDir, { recursive: true });
    }
    const offline: OfflineStack = await startOfflineStack({
      // --profile: every environment is profiled; the route functions' profiles are ranked below.
      ...(context.profile ? { warmNodeArgs: ["--cpu-prof", `--cpu-prof-dir=${context.profileDir}`] } : {}),
      moreRoutes: ["update-source", "create-component"],
      warm: true,
      npmRegistry: registry.url,
      hostEsbuild: true,
      bundlesOutsideProject: true,
    });
    context.defer(() => offline.close());
    const setUpMs = performance.now() - setUpStarted;
    context.log(`deployed in ${(setUpMs / 1000).toFixed(0)} s`);

    const user = await createUserInTable(
      {
        table: offline.deployed[STATEFUL_STACK]?.outputs.ResourcesTableName ?? "",
        region: MOTO_REGION,
        endpoint: offline.moto.endpoint,
        env: {
          AWS_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
          AWS_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
        },
      },
      "bench",
    );
    const api = apiClient(`${offline.gateway.endpoint}/v1`, user.api_key);
    const nameOf = (construct: IConstruct) => offline.physicalIdOf(construct);
    const functionOf = (route: RouteName) => {
      const routeFunction = offline.app.service.routeFunctions.get(route);
      if (!routeFunction) throw new Error(`no route ${route}`);
      return nameOf(routeFunction.function.lambdaFunction);
    };
    const describer = nameOf(offline.app.service.sources.describer);
    const failed = (what: string, answer: ApiAnswer) =>
      new Error(
        `${what} answered ${answer.status}: ${JSON.stringify(answer.json)}\n${offline.logs.slice(-20).join("\n")}`,
      );

    const timed = async (route: RouteName, request: () => Promise<ApiAnswer>): Promise<[Sample, ApiAnswer]> => {
      const functionName = functionOf(route);
      const pidsBefore = offline.lambda.environmentPids(functionName);
      const cpuBefore = pidsBefore.length === 1 ? await treeCpuMs(pidsBefore[0] as number) : Number.NaN;
      const invocationsBefore = offline.lambda.invocations.length;
      const forwardedBefore = offline.lambda.forwarded.length;
      const requestsBefore = registry.requests.length;
      const tarballsBefore = registry.tarballRequests();
      const started = performance.now();
      const from = monoMs();
      const answer = await request();
      const window: [number, number] = [from * 1000, monoMs() * 1000];
      const elapsed = performance.now() - started;
      const pidsAfter = offline.lambda.environmentPids(functionName);
      const cpuAfter =
        pidsAfter.length === 1 && pidsAfter[0] === pidsBefore[0] ? await treeCpuMs(pidsAfter[0] as number) : Number.NaN;
      const spent = <T extends { startedMs: number; endedMs?: number }>(records: readonly T[]) =>
        records.reduce((sum, record) => sum + ((record.endedMs ?? started) - record.startedMs), 0);
      return [
        {
          ms: elapsed,
          window,
          cpuMs: cpuAfter - cpuBefore,
          describerMs: spent(
            offline.lambda.invocations.slice(invocationsBefore).filter((record) => record.functionName === describer),
          ),
          lambdaApiMs: spent(offline.lambda.forwarded.slice(forwardedBefore)),
          registryRequests: registry.requests.length - requestsBefore,
          tarballs: registry.tarballRequests() - tarballsBefore,
        },
        answer,
      ];
    };

    const createSource = async (code: string) => {
      const [sample, answer] = await timed("create-source", () => api("POST", "/sources", { component_code: code }));
      if (answer.status !== 200 || answer.json?.data?.deploy_state === "deploying")
        throw failed("POST /v1/sources", answer);
      return { sample, id: answer.json.data.id as string };
    };
    const updateSource = async (id: string, code: string) => {
      const [sample, answer] = await timed("update-source", () =>
        api("PUT", `/sources/${id}`, { component_code: code }),
      );
      if (answer.status !== 200 || answer.json?.data?.deploy_state === "deploying")
        throw failed("PUT /v1/sources/{id}", answer);
      return sample;
    };
    const createComponent = async (code: string) => {
      const [sample, answer] = await timed("create-component", () =>
        api("POST", "/components", { component_code: code }),
      );
      if (answer.status !== 200 && answer.status !== 201) throw failed("POST /v1/components", answer);
      return sample;
    };

    // Each route's environment (and the describer's) started, cold, by requests without npm packages.
    const warmUps: Record<string, number[]> = { "create-source": [], "update-source": [], "create-component": [] };
    let target = "";
    for (let index = 0; index < 2; index++) {
      const created = await createSource(plainCode(index));
      warmUps["create-source"]?.push(created.sample.ms);
      target = created.id;
      warmUps["update-source"]?.push((await updateSource(target, plainCode(100 + index))).ms);
      warmUps["create-component"]?.push((await createComponent(plainCode(200 + index))).ms);
    }
    context.log(`warm-up (no npm packages), ms: ${JSON.stringify(warmUps)}`);

    const samples: Record<RouteName, Sample[]> = { "create-source": [], "update-source": [], "create-component": [] };
    // First deploy of the set anywhere (cold cache), then distinct components with the same set.
    for (let index = 0; index <= count; index++) {
      samples["create-source"].push((await createSource(formUploadCode(index))).sample);
    }
    // The update route's environment has not installed the set: it finds the tree in S3.
    for (let index = 0; index <= count; index++) {
      samples["update-source"].push(await updateSource(target, formUploadCode(1000 + index)));
    }
    for (let index = 0; index <= count; index++) {
      samples["create-component"].push(await createComponent(formUploadCode(2000 + index)));
    }

    const s3 = new S3Client({ endpoint: offline.moto.endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
    const bucket = offline.physicalIdOf(offline.app.service.sources.npmTrees);
    const trees = (await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: "npm-trees/" }))).Contents ?? [];
    s3.destroy();

    const profiles = context.profile ? await routeProfiles(offline, functionOf, samples, context.profileDir) : {};
    for (const [route, profile] of Object.entries(profiles)) {
      context.log(`${LABELS[route as RouteName]}, warm requests, route function's profile:\n${renderProfile(profile)}`);
    }

    const figures: Record<string, number> = {};
    const details: Record<string, unknown> = {
      count,
      setUpMs: Math.round(setUpMs),
      warmUpMs: warmUps,
      treesInS3: trees.map((tree) => ({ key: tree.Key, bytes: tree.Size })),
      environmentStarts: Object.fromEntries(offline.lambda.environmentStarts),
      registryPackages: packages.length,
    };
    for (const route of ROUTES) {
      const [first, ...warm] = samples[route];
      if (!first) continue;
      const latency = summarize(warm.map((sample) => sample.ms));
      figures[`${route}.first`] = first.ms;
      figures[`${route}.p50`] = latency.p50;
      figures[`${route}.p99`] = latency.p99;
      const phases = (list: readonly Sample[]) => ({
        cpuMs: roundAll(summarize(list.map((sample) => sample.cpuMs))),
        describerMs: roundAll(summarize(list.map((sample) => sample.describerMs))),
        lambdaApiMs: roundAll(summarize(list.map((sample) => sample.lambdaApiMs))),
        registryRequests: list.reduce((sum, sample) => sum + sample.registryRequests, 0),
        tarballs: list.reduce((sum, sample) => sum + sample.tarballs, 0),
      });
      details[route] = {
        first: Object.fromEntries(Object.entries(first).map(([key, value]) => [key, Math.round(value)])),
        warm: { ms: roundAll(latency), ...phases(warm) },
        samplesMs: samples[route].map((sample) => Math.round(sample.ms)),
        ...(profiles[route] ? { profile: profiles[route] } : {}),
      };
      context.log(
        `${LABELS[route]}: first ${ms(first.ms)} (CPU ${ms(first.cpuMs)}, ${first.tarballs} tarballs), then p50 ${ms(latency.p50)}, p99 ${ms(latency.p99)}, max ${ms(latency.max)}`,
      );
    }
    context.note(
      `Both stacks deployed into moto as by the offline deployment test (set-up ${(setUpMs / 1000).toFixed(0)} s), the route functions' bundles run on Node 22, each in one process kept between requests (warm). Each route's environment was started by two requests without npm packages first. Then ${count + 1} requests per route, one at a time, each with new code importing @pipedream/platform (shipped) and form-data (installed from a registry on 127.0.0.1, ${packages.length} package versions served); the first of each route is reported apart. Trees in S3 at the end: ${trees.length}.`,
    );
    context.note(
      "Not covered: arm64 (this machine is x64), Lambda's real CreateFunction and wait until active (moto creates at once), network latency to S3, the registry and Lambda (all on 127.0.0.1), and deploy or activate hooks (handed to the deploy finisher by design).",
    );
    return { rows: rows(figures), details };
  },
};
