import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { keyFolders, registryDirectory } from "#adapters/registry-directory";
import { DEFAULT_REGISTRY_DIR, registryFiles } from "#adapters/registry-files";
import { unpackComponentFiles } from "#core/component-files";
import { appFiles, REGISTRY_TREE } from "../../support/registry-tree.ts";

const shipped = registryFiles(DEFAULT_REGISTRY_DIR);
const scratch = mkdtempSync(join(tmpdir(), "sluice-registry-dir-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Writes `files` (path below `root` -> text) and returns `root`. */
function tree(root: string, files: Record<string, string>): string {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe("registryDirectory", () => {
  const registry = registryDirectory(REGISTRY_TREE, shipped);

  it("serves each source of a registry-layout tree by its key, with the files it imports", async () => {
    const code = await registry.readCode("webhooks-new-request");
    const expected = Object.fromEntries(
      Object.entries(appFiles("webhooks"))
        // The app's action is no import of the source.
        .filter(([path]) => !path.startsWith("actions/"))
        .map(([path, text]) => [`webhooks/${path}`, text]),
    );
    expect(unpackComponentFiles(code ?? "")).toEqual({
      entry: "webhooks/sources/new-request/new-request.mjs",
      files: expected,
    });
    expect(unpackComponentFiles((await registry.readCode("feeds-new-item")) ?? "")?.entry).toBe(
      "feeds/sources/new-item/new-item.ts",
    );
    expect(unpackComponentFiles((await registry.readCode("legacy_counter-counter")) ?? "")?.files).toHaveProperty(
      "legacy_counter/legacy_counter.app.js",
    );
  });

  it("falls back to the shipped registry, and knows no other key", async () => {
    expect(await registry.readCode("http-new-requests")).toBe(await shipped.readCode("http-new-requests"));
    expect(await registry.readCode("no-such-key")).toBeUndefined();
    expect(await registry.readCode("../../etc/passwd")).toBeUndefined();
  });

  it("takes a folder of apps itself (installed @pipedream/<app> packages), and imports across apps", async () => {
    const root = tree(join(scratch, "packages"), {
      "shared/shared.app.mjs": 'export default { type: "app", app: "shared", methods: { hi: () => "hi" } };',
      "other/sources/uses-shared/uses-shared.mjs":
        'import shared from "../../../shared/shared.app.mjs";\nexport default { key: "other-uses-shared", name: "Uses shared", version: "0.0.1", props: { shared }, run() {} };',
    });
    const code = await registryDirectory(root, shipped).readCode("other-uses-shared");
    expect(Object.keys(unpackComponentFiles(code ?? "")?.files ?? {}).sort()).toEqual([
      "other/sources/uses-shared/uses-shared.mjs",
      "shared/shared.app.mjs",
    ]);
  });

  it("looks for an unknown key only in the folders its app and name give, never outside the tree", () => {
    expect(keyFolders("/r", "rss-new-item-in-feed")).toEqual([
      "/r/rss/sources",
      "/r/rss/sources/new-item-in-feed",
      "/r/rss/actions",
      "/r/rss/actions/new-item-in-feed",
    ]);
    for (const key of ["x-../../../proc/self", "x-a/b", "nodash", "-x", "x-.", "x-a%2F"]) {
      expect(keyFolders("/r", key)).toEqual([]);
    }
  });

  it("never reads above its root, not through an import nor through a symlink", async () => {
    const outside = join(scratch, "outside.app.mjs");
    writeFileSync(outside, "export default { secret: true };");
    const root = tree(join(scratch, "hostile"), {
      "evil/sources/passwd/passwd.mjs":
        'import p from "../../../../../etc/passwd";\nexport default { key: "evil-passwd", name: "p", version: "0.0.1", run() {} };',
      "evil/sources/linked/linked.mjs":
        'import app from "../../evil.app.mjs";\nexport default { key: "evil-linked", name: "l", version: "0.0.1", props: { app }, run() {} };',
    });
    symlinkSync(outside, join(root, "evil", "evil.app.mjs"));
    const registry = registryDirectory(root, shipped);
    await expect(registry.readCode("evil-passwd")).rejects.toThrow(
      'key: registry component evil-passwd: evil/sources/passwd/passwd.mjs: cannot import "../../../../../etc/passwd": it leads out',
    );
    await expect(registry.readCode("evil-linked")).rejects.toThrow(
      'cannot import "../../evil.app.mjs": no file found for it in the registry directory',
    );
  });
});
