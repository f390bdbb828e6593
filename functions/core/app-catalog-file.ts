/**
 * The apps file format (docs/accounts.md "Apps"): Sluice's shipped `registry/apps.json` and the
 * operator's `SLUICE_APPS_FILE` (`-c appsFile` on AWS), which adds apps or replaces shipped ones
 * by `name_slug`. Pure: the caller reads the files.
 */
import * as z from "zod";
import type { AppDefinition } from "./ports/app-catalog.ts";
import { sha256Hex } from "./sha256.ts";

/**
 * The file's schema, built on its first use rather than when the module loads: every Lambda function
 * with table access loads this module, and few ever read an apps file; its 80-odd zod schemas were
 * about 6 ms of their cold start (docs/aws.md "Cold starts").
 */
function buildFileSchema() {
  const slug = z.string().regex(/^[a-z0-9][a-z0-9_]{0,63}$/, "must be lower-case letters, digits and _ (at most 64)");
  const httpUrl = z.url({ protocol: /^https?$/, error: "must be an http(s) URL" });

  const appSchema = z
    .object({
      id: z
        .string()
        .regex(/^app_[A-Za-z0-9_-]{1,64}$/, 'must be "app_" and 1-64 letters, digits, _ or -')
        .optional(),
      name_slug: slug,
      name: z.string().min(1).max(200),
      auth_type: z.enum(["keys", "oauth", "none"]),
      fields: z
        .array(
          z
            .string()
            .regex(/^[A-Za-z0-9_]{1,64}$/, "must be letters, digits and _")
            // `credentials.constructor` is never undefined: such a field would pass as given when missing.
            .refine((field) => !(field in Object.prototype), {
              error: (issue) => `must not be ${JSON.stringify(issue.input)}: every object has it`,
            }),
        )
        .max(50)
        .default([]),
      optional_fields: z.array(z.string()).max(50).optional(),
      oauth: z
        .object({
          authorize_url: httpUrl,
          token_url: httpUrl,
          scopes: z.array(z.string().min(1).max(200)).max(100).default([]),
          client_id: z.string().max(500).default(""),
          client_secret: z.string().max(2000).default(""),
        })
        .strict()
        .optional(),
      test_request: z
        .object({
          method: z.enum(["GET", "POST", "HEAD"]).default("GET"),
          // Its scheme and host are the operator's: a placeholder may fill a path or a query, and in
          // the host (`https://{{$auth.subdomain}}.example.com`) only after a fixed scheme.
          url: z
            .string()
            .min(1)
            .max(2000)
            .refine(
              (url) => httpUrl.safeParse(url.replace(/\{\{[^}]*\}\}/g, "x")).success && /^https?:\/\//.test(url),
              {
                error: "must be an http(s) URL (placeholders may fill its parts, not its scheme)",
              },
            ),
          headers: z.record(z.string(), z.string().max(2000)).default({}),
        })
        .strict()
        .optional(),
    })
    .strict()
    .refine((app) => (app.auth_type === "oauth") === (app.oauth !== undefined), {
      message: 'an "oauth" app needs "oauth" settings, and only an "oauth" app may have them',
      path: ["oauth"],
    })
    .refine((app) => (app.optional_fields ?? []).every((field) => app.fields.includes(field)), {
      message: 'must name only fields of "fields"',
      path: ["optional_fields"],
    });

  // Two apps of one slug (or one id) in a file: one would silently hide the other.
  return z
    .object({ apps: z.array(appSchema).max(10_000) })
    .strict()
    .superRefine((file, ctx) => {
      for (const [key, what] of [
        ["name_slug", "slug"],
        ["id", "id"],
      ] as const) {
        const seen = new Map<string, number>();
        for (const [i, app] of file.apps.entries()) {
          const value = app[key];
          if (value === undefined) continue;
          const at = seen.get(value);
          if (at !== undefined) {
            const message = `${JSON.stringify(value)} is already the ${what} of apps[${at}]`;
            ctx.addIssue({ code: "custom", path: ["apps", i, key], message });
          }
          seen.set(value, i);
        }
      }
    });
}

let fileSchema: ReturnType<typeof buildFileSchema> | undefined;

/** The stable `app_` id of a slug, for apps whose entry gives none. */
export const appIdOf = (nameSlug: string) => `app_${sha256Hex(`app:${nameSlug}`).slice(0, 12)}`;

/**
 * The apps of a file's JSON text.
 * @throws Error naming `origin` and the first bad field (`apps[3].oauth.token_url: ...`).
 */
export function parseAppsFile(text: string, origin: string): AppDefinition[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`${origin} is not JSON: ${(error as Error).message}`);
  }
  fileSchema ??= buildFileSchema();
  const parsed = fileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.map((part) => (typeof part === "number" ? `[${part}]` : `.${String(part)}`)).join("");
    throw new Error(`${origin}: ${where ? `${where.replace(/^\./, "")}: ` : ""}${issue?.message ?? "invalid"}`);
  }
  return parsed.data.apps.map((app) => {
    const definition: AppDefinition = {
      id: app.id ?? appIdOf(app.name_slug),
      nameSlug: app.name_slug,
      name: app.name,
      authType: app.auth_type,
      fields: app.fields,
    };
    if (app.optional_fields?.length) definition.optionalFields = app.optional_fields;
    if (app.oauth) {
      definition.oauth = {
        authorizeUrl: app.oauth.authorize_url,
        tokenUrl: app.oauth.token_url,
        scopes: app.oauth.scopes,
        clientId: app.oauth.client_id,
        clientSecret: app.oauth.client_secret,
      };
    }
    if (app.test_request) definition.testRequest = app.test_request;
    return definition;
  });
}

/**
 * The catalog's apps: `shipped`, each replaced by the app of `extra` (the operator's file, read
 * from `origin`) of its slug, then the others of `extra`. An app of `extra` whose id is another
 * app's, or whose slug is another app's id, is refused: the catalog finds by either, so it would
 * answer for that app (`GET /v1/apps/{id}`, a create's `app`).
 * @throws Error naming `origin` and the app (`apps[2].id: ...`).
 */
export function mergeApps(
  shipped: readonly AppDefinition[],
  extra: readonly AppDefinition[],
  origin: string,
): AppDefinition[] {
  const replaced = new Set(extra.map((app) => app.nameSlug));
  const kept = shipped.filter((app) => !replaced.has(app.nameSlug));
  for (const [i, app] of extra.entries()) {
    const others = [...kept, ...extra.filter((other) => other !== app)];
    const sameId = others.find((other) => other.id === app.id);
    if (sameId) throw new Error(`${origin}: apps[${i}].id: ${app.id} is already the id of the ${sameId.nameSlug} app`);
    const slugIsId = others.find((other) => other.id === app.nameSlug);
    if (slugIsId) {
      throw new Error(`${origin}: apps[${i}].name_slug: ${app.nameSlug} is the id of the ${slugIsId.nameSlug} app`);
    }
  }
  return [...kept, ...extra];
}
