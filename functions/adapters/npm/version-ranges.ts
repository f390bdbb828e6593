/**
 * A small semver range check, for the ranges people pin in import strings (`^1`, `~4.17`,
 * `1.2.3`, `1.x`, `*`, `>=1.2 <2`, `1 - 2`, `^1 || ^2`): whether a shipped package's version
 * serves an import (`shipped-packages.ts`). No loose mode. A prerelease version satisfies a range
 * only when one of its comparators names a prerelease of the same x.y.z, as in node-semver.
 * Unparseable ranges (dist-tags such as `next`) satisfy nothing. Our own code rather than the
 * `semver` package, which Sluice does not depend on (docs/decisions.md).
 */

export interface Version {
  readonly major: number;
  readonly minor: number;
  readonly patch: number;
  readonly prerelease: readonly (string | number)[];
}

type Operator = ">=" | ">" | "<" | "<=" | "=";
interface Comparator {
  readonly operator: Operator;
  readonly version: Version;
}

const VERSION =
  /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?$/;
const PARTIAL =
  /^v?(0|[1-9]\d*|[xX*])(?:\.(0|[1-9]\d*|[xX*])(?:\.(0|[1-9]\d*|[xX*])(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?)?)?$/;

/** Parses an exact version (`1.2.3`, `1.2.3-beta.1`); undefined otherwise. */
export function parseVersion(text: string): Version | undefined {
  const match = VERSION.exec(text.trim());
  if (!match) return undefined;
  return {
    major: Number(match[1]),
    minor: Number(match[2]),
    patch: Number(match[3]),
    prerelease: prereleaseIds(match[4]),
  };
}

const prereleaseIds = (text: string | undefined) =>
  text === undefined ? [] : text.split(".").map((id) => (/^\d+$/.test(id) ? Number(id) : id));

/** Negative, zero or positive as `a` sorts before, with or after `b` (semver precedence). */
export function compareVersions(a: Version, b: Version): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch || comparePrerelease(a.prerelease, b.prerelease);
}

function comparePrerelease(a: readonly (string | number)[], b: readonly (string | number)[]): number {
  if (a.length === 0 || b.length === 0) return b.length - a.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (x === y) continue;
    if (typeof x === "number" && typeof y === "number") return x - y;
    if (typeof x === "number") return -1;
    if (typeof y === "number") return 1;
    return x < y ? -1 : 1;
  }
  return 0;
}

/** True when `version` (exact, e.g. `1.2.3`) satisfies the npm `range`. */
export function satisfiesRange(version: string, range: string): boolean {
  const parsed = parseVersion(version);
  if (!parsed) return false;
  const sets = parseRange(range);
  if (!sets) return false;
  return sets.some((set) => satisfiesSet(parsed, set));
}

function satisfiesSet(version: Version, set: readonly Comparator[]): boolean {
  for (const { operator, version: bound } of set) {
    const order = compareVersions(version, bound);
    const ok =
      operator === "="
        ? order === 0
        : operator === ">="
          ? order >= 0
          : operator === ">"
            ? order > 0
            : operator === "<"
              ? order < 0
              : order <= 0;
    if (!ok) return false;
  }
  if (version.prerelease.length === 0) return true;
  return set.some(
    ({ version: bound }) =>
      bound.prerelease.length > 0 &&
      bound.major === version.major &&
      bound.minor === version.minor &&
      bound.patch === version.patch,
  );
}

/** A range as a list of comparator sets (`||` alternatives); undefined when it does not parse. */
function parseRange(range: string): Comparator[][] | undefined {
  const sets: Comparator[][] = [];
  for (const alternative of range.split("||")) {
    const text = alternative.trim().replace(/(>=|<=|>|<|=|~>?|\^)\s+/g, "$1");
    const hyphen = /^(\S+)\s+-\s+(\S+)$/.exec(text);
    const set = hyphen ? hyphenRange(hyphen[1]!, hyphen[2]!) : simpleRange(text);
    if (!set) return undefined;
    sets.push(set);
  }
  return sets;
}

interface PartialVersion {
  readonly major: number | undefined;
  readonly minor: number | undefined;
  readonly patch: number | undefined;
  readonly prerelease: readonly (string | number)[];
}

function parsePartial(text: string): PartialVersion | undefined {
  const match = PARTIAL.exec(text);
  if (!match) return undefined;
  const number = (part: string | undefined) => (part === undefined || /^[xX*]$/.test(part) ? undefined : Number(part));
  const major = number(match[1]);
  const minor = major === undefined ? undefined : number(match[2]);
  const patch = minor === undefined ? undefined : number(match[3]);
  return { major, minor, patch, prerelease: patch === undefined ? [] : prereleaseIds(match[4]) };
}

const makeVersion = (major: number, minor: number, patch: number, prerelease: readonly (string | number)[] = []) => ({
  major,
  minor,
  patch,
  prerelease,
});
/** The lowest version above every release of a line: `<2.0.0-0` excludes 2.0.0's prereleases. */
const floor = (major: number, minor: number, patch: number) => makeVersion(major, minor, patch, [0]);
const lowerBound = (p: PartialVersion) => makeVersion(p.major ?? 0, p.minor ?? 0, p.patch ?? 0, p.prerelease);
/** The first version past a partial: `1` → `2.0.0-0`, `1.2` → `1.3.0-0`. */
const pastPartial = (p: PartialVersion & { major: number }) =>
  p.minor === undefined ? floor(p.major + 1, 0, 0) : floor(p.major, p.minor + 1, 0);

function simpleRange(text: string): Comparator[] | undefined {
  if (text === "") return [];
  const set: Comparator[] = [];
  for (const token of text.split(/\s+/)) {
    const comparators = comparatorsOf(token);
    if (!comparators) return undefined;
    set.push(...comparators);
  }
  return set;
}

function comparatorsOf(token: string): Comparator[] | undefined {
  const match = /^(>=|<=|>|<|=|~>?|\^)?(.*)$/.exec(token);
  const operator = match?.[1] ?? "";
  const p = parsePartial(match?.[2] ?? "");
  if (!p) return undefined;
  if (p.major === undefined)
    return operator === "<" || operator === ">" ? [{ operator: "<", version: floor(0, 0, 0) }] : [];
  const major = p.major;
  const from: Comparator = { operator: ">=", version: lowerBound(p) };
  switch (operator) {
    case "":
    case "=":
      if (p.patch !== undefined) return [{ operator: "=", version: lowerBound(p) }];
      return [from, { operator: "<", version: pastPartial({ ...p, major }) }];
    case "^": {
      const upper =
        major > 0 || p.minor === undefined
          ? floor(major + 1, 0, 0)
          : p.minor > 0 || p.patch === undefined
            ? floor(0, p.minor + 1, 0)
            : floor(0, 0, p.patch + 1);
      return [from, { operator: "<", version: upper }];
    }
    case "~":
    case "~>":
      return [from, { operator: "<", version: pastPartial({ ...p, major }) }];
    case ">=":
      return [from];
    case "<":
      return [{ operator: "<", version: lowerBound(p) }];
    case ">":
      if (p.patch !== undefined) return [{ operator: ">", version: lowerBound(p) }];
      return [{ operator: ">=", version: pastPartial({ ...p, major }) }];
    case "<=":
      if (p.patch !== undefined) return [{ operator: "<=", version: lowerBound(p) }];
      return [{ operator: "<", version: pastPartial({ ...p, major }) }];
    default:
      return undefined;
  }
}

function hyphenRange(low: string, high: string): Comparator[] | undefined {
  const from = parsePartial(low);
  const to = parsePartial(high);
  if (!from || !to) return undefined;
  const set: Comparator[] = [{ operator: ">=", version: lowerBound(from) }];
  if (to.major === undefined) return set;
  if (to.patch !== undefined) set.push({ operator: "<=", version: lowerBound(to) });
  else set.push({ operator: "<", version: pastPartial({ ...to, major: to.major }) });
  return set;
}
