import type { AnyRoute, HttpMethod } from "./route.ts";

export type RouteMatch =
  | { kind: "found"; route: AnyRoute; params: Record<string, string> }
  | { kind: "wrong-method"; allowed: HttpMethod[] }
  | { kind: "not-found" };

interface CompiledRoute {
  route: AnyRoute;
  pattern: RegExp;
  names: string[];
}

/**
 * Matches request paths against the route manifest. Local mode routes every request with it; on
 * AWS, API Gateway routes and the `$default` function uses it to tell 404 from 405. A trailing
 * slash is ignored, as the spec writes some paths with one (`POST /sources/`).
 */
export function createRouter(routes: readonly AnyRoute[]) {
  const compiled: CompiledRoute[] = routes.map((route) => {
    const names: string[] = [];
    const source = route.path
      .split("/")
      .map((segment) => {
        const placeholder = /^\{([a-z_]+)\}$/.exec(segment);
        if (!placeholder?.[1]) return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
        names.push(placeholder[1]);
        return "([^/]+)";
      })
      .join("/");
    return { route, pattern: new RegExp(`^${source}/?$`), names };
  });

  return function match(method: string, path: string): RouteMatch {
    const allowed: HttpMethod[] = [];
    for (const { route, pattern, names } of compiled) {
      const found = pattern.exec(path);
      if (!found) continue;
      if (route.method !== method) {
        allowed.push(route.method);
        continue;
      }
      const params: Record<string, string> = {};
      names.forEach((name, i) => {
        params[name] = safeDecode(found[i + 1] ?? "");
      });
      return { kind: "found", route, params };
    }
    return allowed.length > 0 ? { kind: "wrong-method", allowed } : { kind: "not-found" };
  };
}

/** A malformed escape stays as it is; the route's schema then rejects it with a 400. */
function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
