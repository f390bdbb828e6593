/**
 * The apps Sluice knows (`GET /v1/apps`): the shipped catalog plus `SLUICE_APPS_FILE`'s
 * additions and overrides (docs/accounts.md "Apps"). Loaded at start; read-only afterwards.
 */
export interface AppDefinition {
  /** `app_` id, stable for a `nameSlug`. */
  id: string;
  /** What components write in `app:` (`github`, `postgresql`). */
  nameSlug: string;
  /** Display name. */
  name: string;
  authType: "oauth" | "keys" | "none";
  /** The fields of `$auth` an account of this app carries (`api_key`; for OAuth the provider's extra fields). */
  fields: string[];
  /**
   * Those of `fields` an account may leave out (PostgreSQL's TLS settings); the others are
   * required when an account is created with `POST /v1/accounts`. Absent: none.
   */
  optionalFields?: string[];
  /** OAuth apps only. The client secret comes from configuration, never from component code. */
  oauth?: {
    authorizeUrl: string;
    tokenUrl: string;
    scopes: string[];
    clientId: string;
    clientSecret: string;
  };
  /** The request that tells whether an account works; `{{$auth.<field>}}` in `url` and `headers` is replaced. */
  testRequest?: { method: string; url: string; headers: Record<string, string> };
}

export interface AppCatalog {
  /** Every app, by `nameSlug`. */
  list(): readonly AppDefinition[];
  /** The app of this `app_` id or `nameSlug`. */
  find(idOrSlug: string): AppDefinition | undefined;
}

/** A catalog of the apps given (the last of a slug wins). */
export function staticAppCatalog(apps: readonly AppDefinition[]): AppCatalog {
  const bySlug = new Map<string, AppDefinition>();
  for (const app of apps) bySlug.set(app.nameSlug, app);
  const sorted = [...bySlug.values()].sort((a, b) => (a.nameSlug < b.nameSlug ? -1 : a.nameSlug > b.nameSlug ? 1 : 0));
  const byId = new Map(sorted.map((app) => [app.id, app]));
  return {
    list: () => sorted,
    find: (idOrSlug) => bySlug.get(idOrSlug) ?? byId.get(idOrSlug),
  };
}
