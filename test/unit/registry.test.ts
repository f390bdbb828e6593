import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { indexTree } from "#adapters/registry-directory";
import { DEFAULT_REGISTRY_DIR, readRegistryTemplate, registryFiles } from "#adapters/registry-files";
import type { ComponentDescription } from "#core/component-model";
import { readWorkflowTemplate } from "#core/workflow-templates";
import { createWorkflow } from "#core/workflows";
import { describeComponent } from "#runtime/describe-component";
import { installComponentGlobals } from "#runtime/globals";
import { accountIn, memoryDeps, scriptedHost } from "../support/memory-deps.ts";

const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;
const COMPONENTS = join(DEFAULT_REGISTRY_DIR, "components");
/** Every component file of the shipped tree, `<app>/<sources|actions>/<name>/<name>.mjs`, walked here (not by the adapter under test). */
const PATHS = readdirSync(COMPONENTS, { recursive: true, encoding: "utf8" })
  .map((path) => path.split("\\").join("/"))
  .filter((path) => /^[^/]+\/(sources|actions)\/([^/]+)\/\2\.mjs$/.test(path))
  .sort();
/** The registry's key of a path: `<app>-<name>`. */
const keyOf = (path: string) => {
  const [app, , name] = path.split("/");
  return `${app}-${name}`;
};
const KEYS = PATHS.map(keyOf);
const TEMPLATE_IDS = readdirSync(join(DEFAULT_REGISTRY_DIR, "templates"))
  .filter((file) => file.endsWith(".json"))
  .map((file) => file.slice(0, -".json".length));

interface RegistryComponent {
  key: string;
  name: string;
  description: string;
  version: string;
  type: string;
  props: Record<string, { type?: string }>;
  run: unknown;
}

/** The registry files are the repo's own, trusted code: imported directly to read their metadata. */
async function load(key: string): Promise<RegistryComponent> {
  const path = PATHS.find((candidate) => keyOf(candidate) === key) ?? `${key}.mjs`;
  const module = (await import(pathToFileURL(join(COMPONENTS, path)).href)) as {
    default: RegistryComponent;
  };
  return module.default;
}

describe("registry components", () => {
  it("ships the documented components in the registry's layout, each app with its app file", async () => {
    expect(PATHS).toEqual([
      "http/actions/send-request/send-request.mjs",
      "http/sources/new-requests/new-requests.mjs",
      "schedule/sources/custom-interval/custom-interval.mjs",
    ]);
    for (const app of ["http", "schedule"]) {
      const module = (await import(pathToFileURL(join(COMPONENTS, app, `${app}.app.mjs`)).href)) as {
        default: { type: string; app: string };
      };
      expect(module.default).toMatchObject({ type: "app", app });
    }
    // The adapter finds the same keys at the same paths.
    expect([...(await indexTree(DEFAULT_REGISTRY_DIR)).entries].sort()).toEqual(
      PATHS.map((path) => [keyOf(path), path]).sort(),
    );
  });

  it.each(KEYS)("%s: its key is <app>-<name> of its path and its version is semver", async (key) => {
    const component = await load(key);
    expect(component.key).toBe(key);
    expect(component.version).toMatch(SEMVER);
    expect(component.name).toEqual(expect.any(String));
    expect(component.description).toEqual(expect.any(String));
    expect(["source", "action"]).toContain(component.type);
    expect(component.run).toEqual(expect.any(Function));
  });

  it("declares the interfaces each source needs", async () => {
    expect((await load("http-new-requests")).props.http).toEqual({ type: "$.interface.http", customResponse: true });
    expect((await load("schedule-custom-interval")).props.timer).toMatchObject({
      type: "$.interface.timer",
      default: { intervalSeconds: 900 },
    });
    expect((await load("http-send-request")).type).toBe("action");
  });
});

describe("the shipped registry's readCode", () => {
  // A file the traversal keys below would reach if keys were joined into paths unchecked. Made at
  // collection time because the table of keys below names it.
  const outside = mkdtempSync(join(tmpdir(), "sluice-registry-"));
  writeFileSync(join(outside, "secret.mjs"), "export default {}");

  afterAll(() => {
    rmSync(outside, { recursive: true, force: true });
  });

  const shipped = registryFiles(DEFAULT_REGISTRY_DIR);

  it.each(PATHS)(
    "reads %s as it is, by its key (a file that imports nothing keeps its text and hash)",
    async (path) => {
      expect(await shipped.readCode(keyOf(path))).toBe(readFileSync(join(COMPONENTS, path), "utf8"));
    },
  );

  it("returns undefined for a valid key without a file", async () => {
    expect(await shipped.readCode("no-such-component")).toBeUndefined();
  });

  it("returns undefined when the registry folder does not exist", async () => {
    expect(await registryFiles(join(outside, "missing")).readCode("http-new-requests")).toBeUndefined();
  });

  it.each([
    ["a parent-folder key", "../package"],
    ["a key with a slash", "sub/secret"],
    ["an absolute path", join(outside, "secret")],
    ["a traversal into another folder", `../../../../../../..${join(outside, "secret")}`],
    ["a key with a dot", "http-new-requests.mjs"],
    ["an uppercase key", "HTTP-new-requests"],
    ["a key starting with a dash", "-http"],
    ["an empty key", ""],
    ["a key over 100 characters", "a".repeat(101)],
    ["a key with a NUL byte", "http-new-requests\u0000"],
  ])("returns undefined for %s", async (_what, key) => {
    expect(await shipped.readCode(key)).toBeUndefined();
  });

  it("reads from another registry folder when given one, and serves a registry directory before it", async () => {
    const other = join(outside, "other");
    mkdirSync(join(other, "components", "secret", "sources", "x"), { recursive: true });
    writeFileSync(join(other, "components", "secret", "sources", "x", "x.mjs"), 'export default { key: "secret" };');
    expect(await registryFiles(other).readCode("secret")).toBe('export default { key: "secret" };');
    expect(await registryFiles(other).readCode("http-new-requests")).toBeUndefined();
    const both = registryFiles(DEFAULT_REGISTRY_DIR, other);
    expect(await both.readCode("secret")).toBe('export default { key: "secret" };');
    expect(await both.readCode("http-new-requests")).toContain('key: "http-new-requests"');
  });
});

/**
 * Describes code as the sandbox does, in this process: the registry's files are the repo's own,
 * trusted code, so their steps are imported directly (with the globals the sandbox installs).
 */
async function describeTrusted(code: string): Promise<ComponentDescription> {
  installComponentGlobals();
  const module = (await import(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`)) as {
    default: unknown;
  };
  return describeComponent(module.default) as ComponentDescription;
}

const REGISTRY = registryFiles(DEFAULT_REGISTRY_DIR);

describe("workflow templates", () => {
  it("ships the documented templates", () => {
    expect(TEMPLATE_IDS.sort()).toEqual(["tch_errors_to_webhook", "tch_http_echo", "tch_schedule_to_webhook"]);
  });

  it.each(TEMPLATE_IDS)("%s parses, and creates a valid workflow with its steps and triggers", async (id) => {
    const { host } = scriptedHost();
    const deps = memoryDeps(Date.UTC(2026, 10, 26, 9), {
      host: { ...host, describe: describeTrusted },
      registry: REGISTRY,
      timers: { schedule: async () => {}, cancel: async () => {} },
    });
    const template = await readWorkflowTemplate(deps, id);
    expect(template).toMatchObject({ id, name: expect.any(String), description: expect.any(String) });
    const account = await accountIn(deps, "templates");
    const created = await createWorkflow(deps, { userId: account.user.id }, { template_id: id });
    expect(created.name).toBe(template.settings.name ?? template.name);
    expect(created.active).toBe(false);
    expect(created.steps.map((step) => step.namespace)).toEqual(template.steps.map((step) => step.namespace));
    expect(created.triggers).toHaveLength(template.triggers.length);
  });

  it("tch_http_echo answers through $.respond on an HTTP trigger with a custom response", async () => {
    const template = await readWorkflowTemplate({ registry: REGISTRY }, "tch_http_echo");
    expect(template.triggers).toEqual([{ type: "http", props: { custom_response: true } }]);
    expect(template.steps[0]?.component_code).toContain("$.respond(");
  });

  it("tch_schedule_to_webhook sends with $.send.http on a timer", async () => {
    const template = await readWorkflowTemplate({ registry: REGISTRY }, "tch_schedule_to_webhook");
    expect(template.triggers.map((trigger) => trigger.type)).toEqual(["timer"]);
    expect(template.steps[0]?.component_code).toContain("$.send.http(");
  });
});

describe("readRegistryTemplate", () => {
  it.each(TEMPLATE_IDS)("reads the JSON of %s", async (id) => {
    expect(JSON.parse((await readRegistryTemplate(DEFAULT_REGISTRY_DIR, id)) ?? "null")).toMatchObject({ id });
  });

  it.each([
    ["an id without tch_", "http_echo"],
    ["a parent-folder id", "tch_../../package"],
    ["an id with a slash", "tch_x/y"],
    ["an id with a dot", "tch_http_echo.json"],
    ["an uppercase id", "tch_HTTP_echo"],
    ["an id with a dash", "tch_http-echo"],
    ["an id over 64 characters", `tch_${"a".repeat(61)}`],
    ["an empty id", ""],
    ["a valid id without a file", "tch_nothing_here"],
  ])("returns undefined for %s", async (_what, id) => {
    expect(await readRegistryTemplate(DEFAULT_REGISTRY_DIR, id)).toBeUndefined();
  });
});
