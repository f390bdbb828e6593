/**
 * The module specifiers a JavaScript or TypeScript file names, found without a parser: string
 * literals that follow `from`, `import`, `import(` or `require(`, outside comments, template
 * literals and regular expressions. Used to follow a `component_url`'s relative imports before
 * anything is bundled. It may miss an import written in an odd way (the bundler then says that
 * file is missing, naming it) and may find one more than the code makes (a file fetched for
 * nothing); it never reads anything itself.
 *
 * The code is a user's: the scan is linear in its length but for template literals nested in
 * each other's `${...}`, whose inner text is scanned once per level, up to
 * {@link MAX_TEMPLATE_NESTING} levels (deeper parts are not scanned: an import there is missed).
 */

/** Template literals nested in `${...}` that are scanned for imports (real code nests two or three). */
export const MAX_TEMPLATE_NESTING = 8;

const IDENTIFIER = /[A-Za-z0-9_$]/;
/** After these tokens a `/` starts a regular expression, not a division. */
const BEFORE_REGEX = new Set([
  "(",
  ",",
  "=",
  ":",
  "[",
  "!",
  "&",
  "|",
  "?",
  "{",
  "}",
  ";",
  "+",
  "-",
  "*",
  "%",
  "<",
  ">",
  "~",
  "^",
  "return",
  "typeof",
  "case",
  "do",
  "else",
  "in",
  "of",
  "new",
  "delete",
  "void",
  "throw",
  "yield",
  "await",
  "",
]);

/** Every specifier `code` imports or requires with a literal string, in order, once each. */
export function importSpecifiers(code: string): string[] {
  const found = new Set<string>();
  scan(code, 0, found);
  return [...found];
}

/** Adds what `code` imports to `found`; `nesting` is how many template substitutions it is inside. */
function scan(code: string, nesting: number, found: Set<string>): void {
  // The last two significant tokens: what a string literal follows decides whether it is a specifier.
  let previous = "";
  let beforePrevious = "";
  const push = (token: string) => {
    beforePrevious = previous;
    previous = token;
  };
  let i = 0;
  while (i < code.length) {
    const char = code[i] as string;
    const next = code[i + 1];
    if (/\s/.test(char)) {
      i++;
    } else if (char === "/" && next === "/") {
      const end = code.indexOf("\n", i);
      i = end === -1 ? code.length : end;
    } else if (char === "/" && next === "*") {
      const end = code.indexOf("*/", i + 2);
      i = end === -1 ? code.length : end + 2;
    } else if (char === '"' || char === "'") {
      const end = stringEnd(code, i);
      const value = code.slice(i + 1, end - 1);
      const isSpecifier =
        previous === "from" ||
        previous === "import" ||
        (previous === "(" && (beforePrevious === "require" || beforePrevious === "import"));
      if (isSpecifier && !value.includes("\\")) found.add(value);
      push("string");
      i = end;
    } else if (char === "`") {
      const template = templateEnd(code, i);
      // `${...}` parts are code: a require() in one counts.
      if (nesting < MAX_TEMPLATE_NESTING) for (const part of template.substitutions) scan(part, nesting + 1, found);
      i = template.end;
      push("template");
    } else if (char === "/" && BEFORE_REGEX.has(previous)) {
      i = regexEnd(code, i);
      push("regex");
    } else if (IDENTIFIER.test(char)) {
      let end = i + 1;
      while (end < code.length && IDENTIFIER.test(code[end] as string)) end++;
      // `x.from "..."` is no import: a member name is not the keyword.
      push(code[i - 1] === "." ? "member" : code.slice(i, end));
      i = end;
    } else {
      push(char);
      i++;
    }
  }
}

/** The index after the string literal that starts at `start`. */
function stringEnd(code: string, start: number): number {
  const quote = code[start];
  let i = start + 1;
  while (i < code.length && code[i] !== quote && code[i] !== "\n") i += code[i] === "\\" ? 2 : 1;
  return Math.min(i + 1, code.length);
}

/**
 * The index after the template literal that starts at `start`, and the code of its `${...}`
 * parts (a nested template or a string holding a brace inside one may end a part early: such a
 * part is scanned in pieces, which can only miss an import, never read one that is not there).
 */
function templateEnd(code: string, start: number): { end: number; substitutions: string[] } {
  const substitutions: string[] = [];
  let i = start + 1;
  let depth = 0;
  let partStart = 0;
  while (i < code.length) {
    const char = code[i];
    if (char === "\\") {
      i += 2;
      continue;
    }
    if (depth === 0 && char === "`") return { end: i + 1, substitutions };
    if (char === "$" && code[i + 1] === "{" && depth === 0) {
      depth = 1;
      i += 2;
      partStart = i;
      continue;
    }
    if (depth > 0 && char === "{") depth++;
    else if (depth > 0 && char === "}" && --depth === 0) substitutions.push(code.slice(partStart, i));
    i++;
  }
  return { end: code.length, substitutions };
}

/** The index after the regular expression literal that starts at `start`. */
function regexEnd(code: string, start: number): number {
  let i = start + 1;
  let inClass = false;
  while (i < code.length && code[i] !== "\n") {
    const char = code[i];
    if (char === "\\") {
      i += 2;
      continue;
    }
    if (char === "[") inClass = true;
    else if (char === "]") inClass = false;
    else if (char === "/" && !inClass) return i + 1;
    i++;
  }
  return i;
}
