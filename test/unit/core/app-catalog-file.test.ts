import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { APPS_FILE_MAX_BYTES, loadAppCatalog } from "#adapters/app-catalog-files";
import { DEFAULT_REGISTRY_DIR } from "#adapters/registry-files";
import { appIdOf, parseAppsFile } from "#core/app-catalog-file";

/** A temporary folder for an apps file, removed after the test (one holds an 8 MiB file). */
const made: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "apps-"));
  made.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const oauthApp = {
  name_slug: "acme",
  name: "Acme",
  auth_type: "oauth",
  fields: ["region"],
  oauth: {
    authorize_url: "http://127.0.0.1:9/authorize",
    token_url: "http://127.0.0.1:9/token",
    scopes: ["read"],
    client_id: "cid",
    client_secret: "secret",
  },
  test_request: { url: "http://127.0.0.1:9/me", headers: { Authorization: "Bearer {{$auth.oauth_access_token}}" } },
};

describe("the apps file", () => {
  it("takes test request URLs whose placeholders fill a host, a path or a query", () => {
    for (const url of [
      "https://{{$auth.subdomain}}.example.com/api/me",
      "https://api.example.com/users/{{$auth.user_id}}?key={{ $auth.api_key }}",
    ]) {
      expect(
        parseAppsFile(JSON.stringify({ apps: [{ ...oauthApp, test_request: { url } }] }), "f")[0]?.testRequest?.url,
      ).toBe(url);
    }
  });

  it("reads an OAuth app into the catalog's shape, with a stable id and defaults", () => {
    const [app] = parseAppsFile(JSON.stringify({ apps: [oauthApp] }), "test");
    expect(app).toEqual({
      id: appIdOf("acme"),
      nameSlug: "acme",
      name: "Acme",
      authType: "oauth",
      fields: ["region"],
      oauth: {
        authorizeUrl: "http://127.0.0.1:9/authorize",
        tokenUrl: "http://127.0.0.1:9/token",
        scopes: ["read"],
        clientId: "cid",
        clientSecret: "secret",
      },
      testRequest: {
        method: "GET",
        url: "http://127.0.0.1:9/me",
        headers: { Authorization: "Bearer {{$auth.oauth_access_token}}" },
      },
    });
    expect(appIdOf("acme")).toMatch(/^app_[0-9a-f]{12}$/);
    expect(appIdOf("acme")).not.toBe(appIdOf("acme2"));
  });

  it.each([
    ["not JSON", "{", /the file f is not JSON/],
    ["an unknown field", JSON.stringify({ apps: [{ ...oauthApp, color: "red" }] }), /apps\[0\]: .*color/],
    [
      "oauth settings missing",
      JSON.stringify({ apps: [{ ...oauthApp, oauth: undefined }] }),
      /apps\[0\]\.oauth: an "oauth" app/,
    ],
    ["oauth on a key app", JSON.stringify({ apps: [{ ...oauthApp, auth_type: "keys" }] }), /apps\[0\]\.oauth/],
    [
      "a bad slug",
      JSON.stringify({ apps: [{ ...oauthApp, name_slug: "Acme Corp" }] }),
      /apps\[0\]\.name_slug: must be lower-case/,
    ],
    [
      "a token URL that is not http",
      JSON.stringify({ apps: [{ ...oauthApp, oauth: { ...oauthApp.oauth, token_url: "file:///etc/passwd" } }] }),
      /apps\[0\]\.oauth\.token_url: must be an http\(s\) URL/,
    ],
    [
      "an optional field that is not a field",
      JSON.stringify({ apps: [{ ...oauthApp, optional_fields: ["zone"] }] }),
      /apps\[0\]\.optional_fields: must name only fields of "fields"/,
    ],
    [
      "a test request to a file",
      JSON.stringify({ apps: [{ ...oauthApp, test_request: { url: "file:///etc/passwd" } }] }),
      /apps\[0\]\.test_request\.url: must be an http\(s\) URL/,
    ],
    [
      "a test request whose scheme is a placeholder",
      JSON.stringify({ apps: [{ ...oauthApp, test_request: { url: "{{$auth.url}}" } }] }),
      /apps\[0\]\.test_request\.url: must be an http\(s\) URL/,
    ],
    [
      "two apps of one slug",
      JSON.stringify({ apps: [oauthApp, { ...oauthApp, name: "Acme again" }] }),
      /apps\[1\]\.name_slug: "acme" is already the slug of apps\[0\]/,
    ],
    [
      "two apps of one id",
      JSON.stringify({
        apps: [
          { ...oauthApp, id: "app_x" },
          { ...oauthApp, name_slug: "other", id: "app_x" },
        ],
      }),
      /apps\[1\]\.id: "app_x" is already the id of apps\[0\]/,
    ],
    [
      "a field named like a property every object has",
      JSON.stringify({ apps: [{ ...oauthApp, fields: ["region", "constructor"] }] }),
      /apps\[0\]\.fields\[1\]: must not be "constructor"/,
    ],
    [
      "a __proto__ field",
      JSON.stringify({ apps: [{ ...oauthApp, fields: ["__proto__"] }] }),
      /apps\[0\]\.fields\[0\]: must not be "__proto__"/,
    ],
  ])("refuses %s, naming the file and the field", (_what, text, message) => {
    expect(() => parseAppsFile(text, "the file f")).toThrow(message);
  });
});

describe("optional fields", () => {
  it("reads optional_fields, and an app without them has none (files written before them still load)", () => {
    const [keys, plain] = parseAppsFile(
      JSON.stringify({
        apps: [
          { name_slug: "db", name: "DB", auth_type: "keys", fields: ["host", "ca"], optional_fields: ["ca"] },
          { name_slug: "plain", name: "Plain", auth_type: "keys", fields: ["api_key"] },
        ],
      }),
      "test",
    );
    expect(keys?.optionalFields).toEqual(["ca"]);
    expect(plain).not.toHaveProperty("optionalFields");
    expect(loadAppCatalog(DEFAULT_REGISTRY_DIR).find("postgresql")?.optionalFields).toEqual([
      "ca",
      "key",
      "cert",
      "ssl_verification_mode",
    ]);
  });
});

describe("loadAppCatalog", () => {
  it("serves the shipped apps, by slug and by id", () => {
    const catalog = loadAppCatalog(DEFAULT_REGISTRY_DIR);
    const postgresql = catalog.find("postgresql");
    expect(postgresql).toMatchObject({ authType: "keys", fields: expect.arrayContaining(["host", "password"]) });
    expect(catalog.find(postgresql?.id ?? "")).toBe(postgresql);
    expect(catalog.list().map((app) => app.nameSlug)).toEqual([...catalog.list().map((app) => app.nameSlug)].sort());
  });

  it("lets the operator's file add apps and replace shipped ones by slug", () => {
    const dir = tempDir();
    const file = join(dir, "apps.json");
    writeFileSync(
      file,
      JSON.stringify({
        apps: [oauthApp, { name_slug: "github", name: "GitHub Enterprise", auth_type: "keys", fields: ["token"] }],
      }),
    );
    const catalog = loadAppCatalog(DEFAULT_REGISTRY_DIR, file);
    expect(catalog.find("acme")?.oauth?.clientSecret).toBe("secret");
    expect(catalog.find("github")).toMatchObject({ name: "GitHub Enterprise", authType: "keys", fields: ["token"] });
    expect(catalog.list().filter((app) => app.nameSlug === "github")).toHaveLength(1);
  });

  it("refuses an operator's app whose id is another app's, or whose slug is another app's id", () => {
    const dir = tempDir();
    const file = join(dir, "apps.json");
    const github = loadAppCatalog(DEFAULT_REGISTRY_DIR).find("github");
    // Served by that id, it would answer GET /v1/apps/<github's id> and take github's accounts' creates.
    for (const evil of [
      { name_slug: "evil", name: "Evil", auth_type: "keys", fields: ["token"], id: github?.id },
      { name_slug: github?.id, name: "Evil", auth_type: "keys", fields: ["token"] },
    ]) {
      writeFileSync(file, JSON.stringify({ apps: [evil] }));
      expect(() => loadAppCatalog(DEFAULT_REGISTRY_DIR, file)).toThrow(/apps\[0\]\.(id|name_slug): .*github/);
    }
  });

  it("stops before reading a file past its size limit, saying so", () => {
    const dir = tempDir();
    const file = join(dir, "apps.json");
    writeFileSync(file, `{"apps": []}${" ".repeat(APPS_FILE_MAX_BYTES)}`);
    expect(() => loadAppCatalog(DEFAULT_REGISTRY_DIR, file)).toThrow(
      `the apps file ${file} is ${APPS_FILE_MAX_BYTES + 12} bytes, more than ${APPS_FILE_MAX_BYTES}`,
    );
  });

  it("stops with an error naming a file that cannot be read", () => {
    expect(() => loadAppCatalog(DEFAULT_REGISTRY_DIR, "/nonexistent/apps.json")).toThrow(
      "cannot read the apps file /nonexistent/apps.json: ENOENT",
    );
  });
});
