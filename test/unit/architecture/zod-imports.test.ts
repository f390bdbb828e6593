import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../support/local-process.ts";

/** Every TypeScript file under `folder`. */
function sources(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => join(entry.parentPath, entry.name));
}

describe("imports of zod", () => {
  it('are `import * as z from "zod"` (or type-only) in the code that goes into Lambda bundles', () => {
    // `import { z }` keeps zod's whole namespace, every locale included, in a bundle (decision 381);
    // the bundling test finds it too, but only in its slow infra run.
    const named = ["functions", "runtime-layer"]
      .flatMap((folder) => sources(join(REPO_ROOT, folder)))
      .filter((file) => /^import \{[^}]*\bz\b[^}]*\} from "zod";$/m.test(readFileSync(file, "utf8")))
      .map((file) => relative(REPO_ROOT, file));
    expect(named).toEqual([]);
  });
});
