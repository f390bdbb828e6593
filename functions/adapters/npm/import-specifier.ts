/**
 * The bare import of a component read as an npm package reference, `name[@range][/subpath]`
 * (component-model.md: "a source may pin a version or a version range inside the require
 * string"): `@scope/name@^1/sub` → `{name: "@scope/name", range: "^1", subpath: "sub"}`.
 */

/** A bare import split into its parts. */
export interface NpmSpecifier {
  readonly name: string;
  readonly range: string | undefined;
  readonly subpath: string | undefined;
}

const NAME_PART = /^[a-zA-Z0-9~-][a-zA-Z0-9._~-]*$/;
/**
 * Versions, ranges and dist-tags only. No `:` or `/`, so an import can never make npm install
 * from a URL, a git repository or a local path.
 */
const RANGE = /^[a-zA-Z0-9.^~*<>=|+ -]+$/;
/** npm's longest package name. */
const NAME_LENGTH = 214;

/**
 * Splits a bare import specifier into package name, optional version range and optional subpath.
 * Returns undefined when it is not a valid npm package reference.
 */
export function parseNpmSpecifier(specifier: string): NpmSpecifier | undefined {
  const parts = specifier.split("/");
  const scoped = specifier.startsWith("@");
  const scope = scoped ? parts.shift() : undefined;
  const head = parts.shift();
  if (head === undefined || (scoped && (scope === "@" || scope === undefined))) return undefined;
  const at = head.indexOf("@");
  const bareName = at === -1 ? head : head.slice(0, at);
  const range = at === -1 ? undefined : head.slice(at + 1);
  if (!NAME_PART.test(bareName) || (scope !== undefined && !NAME_PART.test(scope.slice(1)))) return undefined;
  if (range !== undefined && (range.trim() === "" || !RANGE.test(range))) return undefined;
  const name = scope === undefined ? bareName : `${scope}/${bareName}`;
  if (name.length > NAME_LENGTH) return undefined;
  const subpath = parts.length > 0 ? parts.join("/") : undefined;
  if (subpath !== undefined && (subpath === "" || parts.some((part) => part === ".." || part === ""))) return undefined;
  return { name, range: range?.trim(), subpath };
}

/** The argument given to `npm install`, also the text hashed into the cache folder name. */
export const npmInstallSpec = (name: string, range: string | undefined) => `${name}@${range ?? "latest"}`;
