import { route as createComponent } from "./create-component.ts";
import { route as createSource } from "./create-source.ts";
import { route as deleteSource } from "./delete-source.ts";
import { route as getComponent } from "./get-component.ts";
import { route as getMe } from "./get-me.ts";
import { route as getOpenApi } from "./get-openapi.ts";
import { route as getRegistryComponent } from "./get-registry-component.ts";
import { route as getSource } from "./get-source.ts";
import { route as getWorkspace } from "./get-workspace.ts";
import { route as listSourceEvents } from "./list-source-events.ts";
import { route as listUserSources } from "./list-user-sources.ts";
import { route as listWorkspaceProjects } from "./list-workspace-projects.ts";
import { route as listWorkspaceSources } from "./list-workspace-sources.ts";
import type { AnyRoute } from "./route.ts";
import { route as updateSource } from "./update-source.ts";

/**
 * The route manifest: every REST endpoint. Local mode serves these, the service stack makes one
 * Lambda and one API Gateway route of each, and the OpenAPI document lists them.
 */
export const routes: readonly AnyRoute[] = [
  getMe,
  getWorkspace,
  listWorkspaceProjects,
  createComponent,
  getComponent,
  getRegistryComponent,
  createSource,
  updateSource,
  deleteSource,
  getSource,
  listUserSources,
  listWorkspaceSources,
  listSourceEvents,
  getOpenApi,
];
