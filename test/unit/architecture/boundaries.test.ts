import { describe, expect, it } from "vitest";
import {
  boundaryViolations,
  importCycles,
  importsWithKinds,
  loadedBy,
  RUNTIME_PROTOCOL_MODULES,
  resolveImport,
  sourcesUnder,
} from "../../support/import-boundaries.ts";
import { REPO_ROOT } from "../../support/local-process.ts";

const tree = sourcesUnder(REPO_ROOT, ["functions", "runtime-layer", "lib", "bin"]);

describe("the walls between layers (docs/architecture.md)", () => {
  it("holds on this tree: no import crosses a wall", () => {
    expect(tree.size).toBeGreaterThan(200);
    expect(boundaryViolations(tree)).toEqual([]);
  });

  it("has no import cycle inside core: its modules stand in floors, each on those below", () => {
    expect(importCycles(tree, "functions/core/")).toEqual([]);
  });

  it("loads no AWS SDK client, adapter or Lambda entry when the CDK app is loaded (synth)", () => {
    const loaded = [...loadedBy(tree, "bin/app.ts")];
    expect(loaded).toContain("lib/service-stack.ts");
    expect(loaded).toContain("functions/config/shared-names.ts");
    expect(
      loaded.filter(
        (file) =>
          /^(@aws-sdk\/|functions\/(adapters|internal)\/|runtime-layer\/)/.test(file) &&
          !RUNTIME_PROTOCOL_MODULES.includes(file),
      ),
    ).toEqual([]);
  });
});

describe("the boundary check itself", () => {
  const withFile = (file: string, source: string) => new Map([...tree, [file, source]]);

  it.each([
    [
      "functions/core/wrong.ts",
      'import { x } from "#adapters/local/sqlite-database";',
      "functions/adapters/local/sqlite-database.ts",
    ],
    ["functions/core/wrong.ts", 'import type { X } from "../http/route.ts";', "functions/http/route.ts"],
    ["functions/core/wrong.ts", 'import { readFileSync } from "node:fs";', "node:fs"],
    ["functions/core/wrong.ts", 'const m = await import("#runtime/sandbox-entry");', "runtime-layer/sandbox-entry.ts"],
    [
      "functions/core/ports/wrong.ts",
      'import { DynamoDBClient } from "@aws-sdk/client-dynamodb";',
      "@aws-sdk/client-dynamodb",
    ],
    [
      "functions/adapters/aws/wrong.ts",
      'import { EVENT_SOURCE } from "#internal/event-dispatcher";',
      "functions/internal/event-dispatcher.ts",
    ],
    [
      "functions/adapters/local/wrong.ts",
      'export { createLocalServer } from "../../local-mode/server.ts";',
      "functions/local-mode/server.ts",
    ],
    [
      "functions/adapters/local/wrong.ts",
      'import { serialDispatcher } from "#core/dispatcher";',
      "functions/core/dispatcher.ts",
    ],
    [
      "lib/constructs/wrong.ts",
      'import { RESOURCES_TABLE } from "#adapters/aws/table-design";',
      "functions/adapters/aws/table-design.ts",
    ],
    ["lib/wrong.ts", 'import { LambdaClient } from "@aws-sdk/client-lambda";', "@aws-sdk/client-lambda"],
    ["runtime-layer/wrong.ts", 'import { sha256Hex } from "#core/sha256";', "functions/core/sha256.ts"],
  ])("finds a wrong import in %s: %s", (file, source, target) => {
    const violations = boundaryViolations(withFile(file, source));
    expect(violations).toEqual([{ file, imports: target, rule: expect.any(String) }]);
  });

  it("finds an import cycle, however long", () => {
    const cyclic = withFile("functions/core/access.ts", 'import { createSource } from "./sources.ts";');
    const cycles = importCycles(cyclic, "functions/core/");
    expect(cycles).toHaveLength(1);
    expect(cycles[0]).toEqual(expect.arrayContaining(["functions/core/access.ts", "functions/core/sources.ts"]));
  });

  it("lets each layer import what it may", () => {
    const allowed = new Map([
      [
        "functions/core/fine.ts",
        'import { z } from "zod";\nimport type { Json } from "#runtime/protocol";\nimport { x } from "./ids.ts";',
      ],
      [
        "functions/adapters/local/fine.ts",
        'import { x } from "#core/ids";\nimport { y } from "#runtime/run-invocation";',
      ],
      ["lib/fine.ts", 'import { RESOURCES_TABLE } from "#config/shared-names";\nimport * as cdk from "aws-cdk-lib";'],
    ]);
    expect(boundaryViolations(allowed)).toEqual([]);
  });

  it("reads imports, not comments or strings that mention them", () => {
    const source = `/** e.g. import { x } from "#adapters/y"; */\n// import { z } from "#internal/z";\nimport type { A } from "./a.ts";\nexport { b } from "./b.ts";\nimport "./side-effect.ts";\nconst c = await import("./c.ts");`;
    expect(importsWithKinds(source)).toEqual([
      { specifier: "./a.ts", kind: "type" },
      { specifier: "./b.ts", kind: "value" },
      { specifier: "./side-effect.ts", kind: "value" },
      { specifier: "./c.ts", kind: "dynamic" },
    ]);
    expect(resolveImport("functions/core/x.ts", "./ports/deps.ts")).toBe("functions/core/ports/deps.ts");
    expect(resolveImport("lib/x.ts", "#config/env")).toBe("functions/config/env.ts");
  });

  it("follows only what loads: a dynamic import or a type-only import is not loaded with its importer", () => {
    const files = new Map([
      ["bin/app.ts", 'import "./a.ts";\nimport type { T } from "./t.ts";\nconst later = () => import("./d.ts");'],
      ["bin/a.ts", 'import { x } from "@aws-sdk/client-sqs";'],
    ]);
    expect([...loadedBy(files, "bin/app.ts")].sort()).toEqual(["@aws-sdk/client-sqs", "bin/a.ts", "bin/app.ts"]);
  });
});
