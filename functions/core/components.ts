/**
 * Saved components (`sc_`): code read in the sandbox for its metadata, stored with it, found by id
 * or by the `key` its code declares; and the registry of components shipped with Sluice.
 */

import type { Deps } from "#core/ports/deps";
import { requireWorkspace } from "./access.ts";
import { chosenWorkspace, type WorkspaceChoice } from "./accounts.ts";
import { componentFilesOf, entryCode, packComponentFiles, storedComponentFiles } from "./component-files.ts";
import type { ComponentRecord } from "./component-model.ts";
import { DomainError, invalid, isDomainError, notFound } from "./errors.ts";
import type { Caller } from "./identity.ts";
import { formatId, ID_PREFIXES } from "./ids.ts";
import { forbiddenCharacterIn } from "./names.ts";
import { configurablePropsView } from "./props.ts";
import { sha256Hex } from "./sha256.ts";
import { epochSeconds } from "./time.ts";

type ComponentDeps = Pick<Deps, "components" | "host" | "fetcher" | "registry" | "clock" | "ids">;

/** The owner of registry components in the component store; no user has this id. */
export const REGISTRY_OWNER = "registry";

export interface ComponentSourceInput {
  component_code?: string | undefined;
  /** A multi-file component: relative path -> file text (`#core/component-files`). */
  component_files?: Record<string, string> | undefined;
  /** The entry of `component_files` (optional when it holds one file). */
  component_entry?: string | undefined;
  component_url?: string | undefined;
}

/** Whether a request gives code in any of the ways {@link saveComponentOf} takes. */
export const givesCode = (input: ComponentSourceInput) =>
  input.component_code !== undefined || input.component_files !== undefined || input.component_url !== undefined;

/**
 * The code of a request and the field it came from: `component_code` wins, then
 * `component_files` (packed, `#core/component-files`); `component_url` is fetched only when it is
 * alone. (A workflow trigger's props reach here unparsed, hence the type checks.)
 */
async function codeFromInput(
  deps: Pick<Deps, "fetcher">,
  input: ComponentSourceInput,
): Promise<{ code: string; field: string }> {
  if (input.component_code !== undefined) return { code: input.component_code, field: "component_code" };
  if (input.component_files !== undefined) {
    const files: unknown = input.component_files;
    if (typeof files !== "object" || files === null || Array.isArray(files)) {
      throw invalid("component_files", "must be an object of relative paths to file contents");
    }
    const entry: unknown = input.component_entry;
    if (entry !== undefined && typeof entry !== "string") throw invalid("component_entry", "must be a string");
    const component = componentFilesOf(files as Record<string, unknown>, entry);
    return { code: packComponentFiles(component), field: "component_files" };
  }
  if (input.component_entry !== undefined) throw invalid("component_entry", "is given without component_files");
  if (input.component_url !== undefined) {
    return { code: await deps.fetcher.fetchCode(input.component_url), field: "component_url" };
  }
  throw new DomainError("validation", "one of component_code, component_files or component_url is required", [
    { field: "component_code", message: "is required when component_files and component_url are absent" },
  ]);
}

/** Reads `code`'s metadata in the sandbox and saves it as a component of `ownerId`. */
export async function saveComponent(
  deps: ComponentDeps,
  ownerId: string,
  code: string,
  componentUrl?: string,
): Promise<ComponentRecord> {
  if (code.trim() === "") throw invalid("component_code", "must not be empty");
  const metadata = await deps.host.describe(code);
  for (const [what, value] of [
    ["name", metadata.name],
    ["key", metadata.key],
  ] as const) {
    const found = value === undefined ? undefined : forbiddenCharacterIn(value);
    if (found) {
      throw invalid(
        "component_code",
        `the component's ${what} must not contain NUL or Unicode bidirectional control characters (found ${found})`,
      );
    }
  }
  const now = deps.clock.nowMs();
  const record: ComponentRecord = {
    id: deps.ids.newId("component"),
    ownerId,
    name: metadata.name ?? metadata.key ?? "component",
    version: metadata.version ?? "0.0.0",
    code,
    codeHash: sha256Hex(code),
    metadata,
    createdAt: now,
    updatedAt: now,
  };
  if (metadata.key !== undefined) record.key = metadata.key;
  if (componentUrl !== undefined) record.componentUrl = componentUrl;
  await deps.components.putComponent(record);
  return record;
}

/**
 * Saves the code of a request (`POST /components`, or a source's new code) as a component of
 * `ownerId`. Code that does not compile or load fails on the field the client gave it in
 * (`component_code`, `component_files` or `component_url`).
 */
export async function saveComponentOf(deps: ComponentDeps, ownerId: string, input: ComponentSourceInput) {
  const { code, field } = await codeFromInput(deps, input);
  try {
    return await saveComponent(deps, ownerId, code, input.component_url);
  } catch (error) {
    throw onField(error, "component_code", field);
  }
}

/** A validation error on field `from`, told as one on field `to`; any other error as it is. */
function onField(error: unknown, from: string, to: string): unknown {
  if (from === to) return error;
  if (!isDomainError(error) || error.code !== "validation" || !error.issues?.some((issue) => issue.field === from)) {
    return error;
  }
  const issues = error.issues.map((issue) => (issue.field === from ? { ...issue, field: to } : issue));
  const message = error.message.startsWith(`${from}: `)
    ? `${to}: ${error.message.slice(from.length + 2)}`
    : error.message;
  return new DomainError("validation", message, issues);
}

/**
 * `POST /components`. A component belongs to the user who saved it, not to a workspace; a
 * workspace the request names (`org_id`, `workspace_id`) must still be the caller's (404
 * otherwise), so a client that names a wrong one learns it here rather than at deploy.
 */
export async function createComponent(
  deps: ComponentDeps & Pick<Deps, "identity">,
  caller: Caller,
  input: ComponentSourceInput & WorkspaceChoice,
) {
  const workspace = chosenWorkspace(input);
  if (workspace !== undefined) await requireWorkspace(deps, caller, workspace.id);
  return saveComponentOf(deps, caller.userId, input);
}

/** `GET /components/{key|id}`: the caller's component by id, or their newest with that key, or a registry one. */
export async function findComponent(deps: ComponentDeps, caller: Caller, keyOrId: string): Promise<ComponentRecord> {
  if (keyOrId.startsWith(ID_PREFIXES.component)) {
    const component = await deps.components.getComponent(keyOrId);
    if (component && (component.ownerId === caller.userId || component.ownerId === REGISTRY_OWNER)) return component;
    throw notFound("component");
  }
  const own = await deps.components.findComponentByKey(caller.userId, keyOrId);
  if (own) return own;
  return registryComponent(deps, keyOrId);
}

/**
 * A registry component by key. It is saved once under {@link REGISTRY_OWNER} with an id derived
 * from its code, so every deploy of the same registry code refers to the same `sc_` id.
 */
export async function registryComponent(deps: ComponentDeps, key: string): Promise<ComponentRecord> {
  const code = await deps.registry.readCode(key);
  if (code === undefined) throw notFound("registry component");
  const codeHash = sha256Hex(code);
  const id = formatId("component", 0, Buffer.from(codeHash, "hex"));
  const saved = await deps.components.getComponent(id);
  if (saved) return saved;
  const metadata = await deps.host.describe(code);
  const now = deps.clock.nowMs();
  const record: ComponentRecord = {
    id,
    ownerId: REGISTRY_OWNER,
    key,
    name: metadata.name ?? key,
    version: metadata.version ?? "0.0.0",
    code,
    codeHash,
    metadata,
    createdAt: now,
    updatedAt: now,
  };
  try {
    await deps.components.putComponent(record);
  } catch (error) {
    // Two first requests raced; the other one saved the same record.
    const again = await deps.components.getComponent(id);
    if (again) return again;
    throw error;
  }
  return record;
}

/**
 * The Component resource of the spec. `code` is the entry's code of a multi-file component,
 * whose files are also shown as `component_files`, with `component_entry`.
 */
export function componentView(component: ComponentRecord) {
  const view: Record<string, unknown> = {
    id: component.id,
    code: entryCode(component.code),
    code_hash: component.codeHash,
    name: component.name,
    version: component.version,
    configurable_props: configurablePropsView(component.metadata.props),
    created_at: epochSeconds(component.createdAt),
    updated_at: epochSeconds(component.updatedAt),
  };
  if (component.key !== undefined) view.key = component.key;
  if (component.metadata.description !== undefined) view.description = component.metadata.description;
  if (component.metadata.type === "action") view.type = "action";
  if (component.componentUrl !== undefined) view.component_url = component.componentUrl;
  const files = storedComponentFiles(component.code);
  if (files) {
    view.component_entry = files.entry;
    view.component_files = files.files;
  }
  return view;
}
