/**
 * The server's file paths out of text that leaves for a client: bundler and npm messages, load
 * failures, and the stacks and messages of runs. A client learns nothing from
 * `/home/ana/.sluice/sandbox/ws_1/3f…/component.mjs` but where the server keeps its data; the
 * file's name (`component.mjs:12:5`) or its place in a package (`node_modules/lodash/get.js`) says
 * all it needs.
 *
 * Text is the user's too (a component's own messages and logs), so not every `/a/b` is a path of
 * the server: a path is told by its shape. Redacted are `file:` URLs, any path through a
 * `node_modules` folder, paths below one of `roots`, and absolute or `../` paths to a source file
 * (`.js`, `.mjs`, `.ts`, `.json`, ...) or with a `:line` position, as every stack frame has.
 * `/api/users` in a message stays as it is.
 */

/** A path-shaped token: a `file:` URL, or text starting with `/`, `./`, `../` or `C:\`. */
const PATH_TOKEN =
  /(?<![\w.~/\\:@$-])(?:file:\/\/[^\s'"`()<>[\]{},;]*|(?:[A-Za-z]:[\\/]|\.{1,2}[\\/]|[\\/])[^\s'"`()<>[\]{},;]+)/g;
/** A `:line` or `:line:column` suffix, kept after the redacted name. */
const POSITION = /(?::\d+){1,2}$/;
/** Sentence punctuation after a path, kept after the redacted name. */
const TRAILING = /[.,;:!?]+$/;
const SOURCE_FILE = /\.(?:[cm]?[jt]sx?|json|node|map)$/i;

/**
 * `text` with the server's paths cut to what a client may see: the part from the last
 * `node_modules` on, or else the file's name. `roots` are folders of the server whose every path
 * goes (the data dir, npm's home).
 */
export function redactPaths(text: string, roots: readonly string[] = []): string {
  return text.replace(PATH_TOKEN, (token) => redactToken(token, roots));
}

function redactToken(token: string, roots: readonly string[]): string {
  const trailing = TRAILING.exec(token)?.[0] ?? "";
  const withPosition = token.slice(0, token.length - trailing.length);
  const position = POSITION.exec(withPosition)?.[0] ?? "";
  const path = withPosition.slice(0, withPosition.length - position.length);
  const segments = path.split(/[\\/]+/).filter((segment) => segment !== "");
  const packages = segments.lastIndexOf("node_modules");
  if (packages !== -1 && packages < segments.length - 1) {
    return `${segments.slice(packages).join("/")}${position}${trailing}`;
  }
  const name = segments[segments.length - 1];
  if (name === undefined || name === "file:") return token;
  const relative = path.startsWith("./");
  const isServerPath =
    path.startsWith("file:") ||
    roots.some((root) => path === root || path.startsWith(`${root.replace(/[\\/]+$/, "")}/`)) ||
    (!relative && (SOURCE_FILE.test(name) || position !== "") && segments.length > 1);
  return isServerPath ? `${name}${position}${trailing}` : token;
}
