/**
 * The walls between the code's layers, as data, and a checker that finds every import crossing
 * one. Imports are read as text (static `import`/`export ... from`, side-effect imports and
 * dynamic `import()`), type-only ones included: a type from the wrong layer is a wall crossed too.
 * The rules are docs/architecture.md's "Walls"; test/unit/architecture/ runs them on the tree.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";

/** The `imports` of package.json, as folder prefixes. */
const ALIASES: ReadonlyArray<readonly [string, string]> = [
  ["#core/", "functions/core/"],
  ["#adapters/", "functions/adapters/"],
  ["#http/", "functions/http/"],
  ["#config/", "functions/config/"],
  ["#local-mode/", "functions/local-mode/"],
  ["#runtime/", "runtime-layer/"],
  ["#internal/", "functions/internal/"],
];

/** What `#aws-composition` and `#aws-parts/<name>` are outside a Lambda bundle (package.json "imports"). */
export const AWS_STAND_INS = "functions/http/aws-stand-ins.ts";

/** Runtime modules that define what passes between the server and component code: pure, no I/O. */
export const RUNTIME_PROTOCOL_MODULES = [
  "runtime-layer/protocol.ts",
  "runtime-layer/describe-component.ts",
  "runtime-layer/http-response.ts",
  "runtime-layer/result-limits.ts",
  "runtime-layer/json-value.ts",
];

export interface BoundaryRule {
  /** What the rule says, in words (shown with each violation). */
  readonly name: string;
  /** Files the rule is about, by path prefix from the repository root. */
  readonly from: readonly string[];
  /**
   * Whether a file of `from` may import `target` (a repository path, or a package or `node:`
   * name); `files` is the whole tree checked.
   */
  allows(target: string, files: ReadonlyMap<string, string>): boolean;
}

const under = (prefixes: readonly string[]) => (target: string) => prefixes.some((prefix) => target.startsWith(prefix));

export const BOUNDARY_RULES: readonly BoundaryRule[] = [
  {
    name: "core (its ports included) imports only core, the runtime's protocol modules, zod, croner and node:crypto",
    from: ["functions/core/"],
    allows: (target) =>
      target.startsWith("functions/core/") ||
      RUNTIME_PROTOCOL_MODULES.includes(target) ||
      ["zod", "croner", "node:crypto"].includes(target),
  },
  {
    name: "adapters never import functions/internal, functions/http or functions/local",
    from: ["functions/adapters/"],
    allows: (target) => !under(["functions/internal/", "functions/http/", "functions/local-mode/"])(target),
  },
  {
    name: "adapters never import a use case of core (a core module that takes `Deps`): drivers and composition roots call use cases",
    from: ["functions/adapters/"],
    allows: (target, files) => !isUseCase(target, files),
  },
  {
    name: "lib/ never imports adapters, internal functions or the runtime layer",
    from: ["lib/", "bin/app.ts"],
    allows: (target) =>
      !under(["functions/adapters/", "functions/internal/", "runtime-layer/"])(target) &&
      !target.startsWith("@aws-sdk/"),
  },
  {
    name: "the runtime layer imports only itself and Node's built-in modules (it ships alone, as a layer)",
    from: ["runtime-layer/"],
    allows: (target) => target.startsWith("runtime-layer/") || target.startsWith("node:"),
  },
];

/** A use case: a module of core (not a port) that imports `Deps`, the ports it orchestrates. */
function isUseCase(target: string, files: ReadonlyMap<string, string>): boolean {
  if (!target.startsWith("functions/core/") || target.startsWith("functions/core/ports/")) return false;
  return importsOf(files.get(target) ?? "").some((specifier) => resolveImport(target, specifier) === DEPS_MODULE);
}

const DEPS_MODULE = "functions/core/ports/deps.ts";

/** The repository path (or package name) an import specifier in `file` names. */
export function resolveImport(file: string, specifier: string): string {
  // As Node resolves them: only a Lambda bundle (esbuild's conditions) gets the real ones.
  if (specifier.startsWith("#aws-parts/") || specifier === "#aws-composition") return AWS_STAND_INS;
  for (const [alias, folder] of ALIASES) {
    if (specifier.startsWith(alias)) {
      const rest = specifier.slice(alias.length);
      return `${folder}${rest}${/\.(ts|mjs|js|json)$/.test(rest) ? "" : ".ts"}`;
    }
  }
  if (specifier.startsWith(".")) return normalize(join(dirname(file), specifier));
  return specifier;
}

const IMPORT_PATTERN =
  /^\s*(?:import|export)\s+(type\s)?[^'"`;]*?\sfrom\s*["']([^"']+)["']|^\s*import\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/gm;

/** An import of a module: loaded with its importer (`value`), for types only, or later (`dynamic`). */
export interface ImportOf {
  readonly specifier: string;
  readonly kind: "value" | "type" | "dynamic";
}

/** The imports of `source`, in order. */
export function importsWithKinds(source: string): ImportOf[] {
  // Comments first, so an example in a doc comment is not an import.
  const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  return [...code.matchAll(IMPORT_PATTERN)].map((match) => {
    if (match[4] !== undefined) return { specifier: match[4], kind: "dynamic" };
    return { specifier: (match[2] ?? match[3]) as string, kind: match[1] ? "type" : "value" };
  });
}

/** The specifiers `source` imports, of every kind. */
export const importsOf = (source: string): string[] => importsWithKinds(source).map((entry) => entry.specifier);

export interface BoundaryViolation {
  readonly file: string;
  readonly imports: string;
  readonly rule: string;
}

/** Every import of `files` (path from the root to source text) that a rule forbids. */
export function boundaryViolations(
  files: ReadonlyMap<string, string>,
  rules: readonly BoundaryRule[] = BOUNDARY_RULES,
): BoundaryViolation[] {
  const violations: BoundaryViolation[] = [];
  for (const [file, source] of files) {
    const applying = rules.filter((rule) => rule.from.some((prefix) => file.startsWith(prefix)));
    if (applying.length === 0) continue;
    for (const specifier of importsOf(source)) {
      const target = resolveImport(file, specifier);
      for (const rule of applying) {
        if (!rule.allows(target, files)) violations.push({ file, imports: target, rule: rule.name });
      }
    }
  }
  return violations;
}

/** The TypeScript and JavaScript sources under `folders` of `root`, by path from `root`. */
export function sourcesUnder(root: string, folders: readonly string[]): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (folder: string) => {
    for (const entry of readdirSync(join(root, folder), { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== "node_modules") walk(path);
      } else if (/\.(ts|mjs)$/.test(entry.name) && !entry.name.endsWith(".d.ts")) {
        files.set(relative(root, join(root, path)), readFileSync(join(root, path), "utf8"));
      }
    }
  };
  for (const folder of folders) walk(folder);
  return files;
}

/**
 * Every file and package loaded when `entry` is loaded: static imports that are not type-only,
 * followed through the repository (a dynamic `import()` runs later, if ever, and is not followed).
 */
export function loadedBy(files: ReadonlyMap<string, string>, entry: string): Set<string> {
  const loaded = new Set<string>();
  const pending = [entry];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (loaded.has(file)) continue;
    loaded.add(file);
    const source = files.get(file);
    if (source === undefined) continue;
    for (const { specifier, kind } of importsWithKinds(source)) {
      if (kind === "value") pending.push(resolveImport(file, specifier));
    }
  }
  return loaded;
}

/**
 * The import cycles among the files of `files` under `prefix`: each is a set of files that import
 * one another, directly or not (Tarjan's strongly connected components of more than one file).
 */
export function importCycles(files: ReadonlyMap<string, string>, prefix: string): string[][] {
  const graph = new Map<string, string[]>();
  for (const [file, source] of files) {
    if (!file.startsWith(prefix)) continue;
    const targets = importsOf(source).map((specifier) => resolveImport(file, specifier));
    graph.set(
      file,
      targets.filter((target) => target.startsWith(prefix) && files.has(target)),
    );
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (file: string) => {
    index.set(file, index.size);
    low.set(file, index.get(file) as number);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file) as number, low.get(next) as number));
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file) as number, index.get(next) as number));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    for (let member = stack.pop(); member !== undefined; member = stack.pop()) {
      onStack.delete(member);
      component.push(member);
      if (member === file) break;
    }
    if (component.length > 1) cycles.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return cycles;
}
