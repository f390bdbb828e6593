/**
 * The app catalog as the REST API shows it (`GET /v1/apps`, `GET /v1/apps/{id}`): what an account
 * of each app holds, never how Sluice authenticates to the provider (the OAuth client secret and
 * client id stay in the catalog; `include_credentials=1` of an account shows the client id).
 */
import { appIdOf } from "./app-catalog-file.ts";
import { notFound } from "./errors.ts";
import { encodeCursor, type PageInfo } from "./pagination.ts";
import type { AppDefinition } from "./ports/app-catalog.ts";
import type { Deps } from "./ports/deps.ts";

export function appView(app: AppDefinition) {
  const optional = new Set(app.optionalFields ?? []);
  return {
    id: app.id,
    name_slug: app.nameSlug,
    name: app.name,
    auth_type: app.authType,
    fields: app.fields,
    /** The fields `POST /v1/accounts` requires (key apps): `fields` less the optional ones. */
    required_fields: app.authType === "keys" ? app.fields.filter((field) => !optional.has(field)) : [],
    ...(app.oauth ? { oauth_scopes: app.oauth.scopes } : {}),
    has_test_request: app.testRequest !== undefined,
  };
}

export type AppView = ReturnType<typeof appView>;

/** The `{id, name}` of an account's app, also when the operator took the app out of the catalog. */
export function appRefOf(deps: Pick<Deps, "apps">, slug: string) {
  const app = deps.apps.find(slug);
  return { id: app?.id ?? appIdOf(slug), name: app?.name ?? slug };
}

/**
 * A page of the catalog by `name_slug`, forward only (`after` is a slug); `query` keeps the apps
 * whose slug or name contains it, ignoring case.
 */
export function listApps(
  deps: Pick<Deps, "apps">,
  page: { limit: number; after?: string | undefined; query?: string | undefined },
): { page_info: PageInfo; data: AppView[] } {
  const needle = page.query?.toLowerCase();
  const matching = deps.apps
    .list()
    .filter((app) => needle === undefined || app.nameSlug.includes(needle) || app.name.toLowerCase().includes(needle));
  const after = page.after;
  const items = (after === undefined ? matching : matching.filter((app) => app.nameSlug > after)).slice(0, page.limit);
  const first = items[0];
  const last = items.at(-1);
  return {
    page_info: {
      total_count: matching.length,
      count: items.length,
      start_cursor: first ? encodeCursor(first.nameSlug) : null,
      end_cursor: last ? encodeCursor(last.nameSlug) : null,
    },
    data: items.map(appView),
  };
}

/** The app of an `app_` id or a `name_slug`. */
export function getApp(deps: Pick<Deps, "apps">, idOrSlug: string): AppView {
  const app = deps.apps.find(idOrSlug);
  if (!app) throw notFound("app");
  return appView(app);
}
