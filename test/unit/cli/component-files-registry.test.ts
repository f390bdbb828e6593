import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { indexTree, registryDirectory } from "#adapters/registry-directory";
import { componentFilesOf, unpackComponentFiles } from "#core/component-files";
import { readComponent } from "../../../bin/cli/component-files.ts";
import { REGISTRY_TREE } from "../../support/registry-tree.ts";

/*
 * `sluice deploy` of every component of the registry suite's fixture tree, up to the request it
 * sends: the files the CLI reads for an entry must be the ones the server gathers for the same
 * entry by itself (a registry directory and a `component_url` tree walk the same way), and be
 * accepted as `component_files`. Spawning 35 deploys would take minutes; cli-commands.test.ts
 * deploys registry-layout components for real.
 */

const COMPONENTS = join(REGISTRY_TREE, "components");
const nothing = { readCode: async () => undefined, readTemplate: async () => undefined };
const served = registryDirectory(REGISTRY_TREE, nothing);
const entries = [...(await indexTree(REGISTRY_TREE)).entries];

describe("the files sluice deploy sends for each registry-suite component", () => {
  it("covers the whole suite", () => {
    expect(entries.length).toBeGreaterThanOrEqual(35);
  });

  it.each(entries)("%s (%s): the files the server gathers, accepted as component_files", async (key, entry) => {
    const { body } = await readComponent(join(COMPONENTS, entry), { root: COMPONENTS });
    const sent =
      "component_files" in body
        ? { entry: body.component_entry, files: body.component_files }
        : { entry, files: { [entry]: body.component_code } };
    const code = (await served.readCode(key)) ?? "";
    const gathered = unpackComponentFiles(code) ?? { entry, files: { [entry]: code } };
    expect(sent).toEqual(gathered);
    if ("component_files" in body) expect(componentFilesOf(body.component_files, body.component_entry)).toEqual(sent);
  });
});
