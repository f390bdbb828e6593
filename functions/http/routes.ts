import { route as getMe } from "./get-me.ts";
import { route as getOpenApi } from "./get-openapi.ts";
import { route as getWorkspace } from "./get-workspace.ts";
import { route as listWorkspaceProjects } from "./list-workspace-projects.ts";
import type { AnyRoute } from "./route.ts";

/**
 * The route manifest: every REST endpoint. Local mode serves these, the service stack makes one
 * Lambda and one API Gateway route of each, and the OpenAPI document lists them.
 */
export const routes: readonly AnyRoute[] = [getMe, getWorkspace, listWorkspaceProjects, getOpenApi];
