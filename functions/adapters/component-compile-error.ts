/**
 * The error of code that cannot be bundled or loaded, as the API reports it: a `validation` error
 * on `component_code`. Shared by the local sandbox's bundler and the AWS source bundler; imports
 * nothing but types of esbuild, so a Lambda bundling this file does not pull esbuild in.
 *
 * esbuild's messages can quote the files it parsed. The component's own code is the user's to
 * see; anything else (a package file, or a file esbuild should never have read) is named, never
 * quoted. No message carries a path of the server ({@link redactPaths}).
 */
import type { Message } from "esbuild";
import { COMPONENT_FILES_NAMESPACE } from "#adapters/component-files-plugin";
import { DomainError } from "#core/errors";
import { redactPaths } from "#core/redact-paths";

const FIELD = "component_code";

/** The name the user's code has in bundles, source maps, stack frames and esbuild's messages. */
export const SOURCE_FILE = "component.ts";

/** Plugins of Sluice, whose messages say only what Sluice wrote into them. */
const OWN_PLUGINS = new Set([
  "sluice-no-file-imports",
  "sluice-npm-packages",
  "sluice-input-source-maps",
  "sluice-component-files",
  "sluice-pipedream-types",
]);

export const invalidCode = (message: string) => {
  const safe = redactPaths(message);
  return new DomainError("validation", `${FIELD}: ${safe}`, [{ field: FIELD, message: safe }]);
};

/** Maps a place in the code esbuild parsed (1-based line, 0-based column) to the user's own code. */
export type UserPosition = (line: number, column: number) => { line: number; column: number } | undefined;

/**
 * What a failed esbuild `build` or `transform` becomes: its first message, quoted with the line
 * and column when it is about the user's code, else only named. A plugin that threw a DomainError
 * (a package that cannot be installed) keeps its own error; anything that is not a build failure
 * is returned as it is.
 */
export function compileError(error: unknown, position?: UserPosition): unknown {
  const first = (error as { errors?: Message[] }).errors?.[0];
  if (!first) return error;
  const detail = first.detail as { name?: unknown; code?: unknown } | undefined;
  if (detail?.name === "DomainError" && typeof detail.code === "string") return detail;
  return invalidCode(describeMessage(first, position));
}

function describeMessage(message: Message, position: UserPosition | undefined): string {
  const location = message.location;
  // The user's code is esbuild's stdin, shown as SOURCE_FILE; any file from disk (a package) is
  // shown with its folders, relative to the bundle's folder.
  if (location && location.file === SOURCE_FILE) {
    const at = position ? position(location.line, location.column) : location;
    return at ? `${message.text} (line ${at.line}, column ${at.column + 1})` : message.text;
  }
  // A file of a multi-file component is the user's too: named by its own path (its line is one
  // of esbuild's printed file, so only syntax errors, caught before, carry lines).
  const ownFile = location?.file.startsWith(`${COMPONENT_FILES_NAMESPACE}:`)
    ? location.file.slice(COMPONENT_FILES_NAMESPACE.length + 1)
    : undefined;
  if (ownFile !== undefined) return OWN_PLUGINS.has(message.pluginName) ? message.text : `${ownFile}: ${message.text}`;
  const inPackage = location ? packageFile(location.file) : undefined;
  if (location && inPackage) {
    return `npm package "${inPackage.name}" could not be bundled: the error is in ${inPackage.file}, line ${location.line}`;
  }
  if (OWN_PLUGINS.has(message.pluginName)) return message.text;
  return "the component could not be bundled";
}

/** The package a file belongs to and its path from `node_modules` on, from the last `node_modules`. */
function packageFile(file: string): { name: string; file: string } | undefined {
  const segments = file.split(/[\\/]+/);
  const at = segments.lastIndexOf("node_modules");
  const scoped = segments[at + 1]?.startsWith("@") ?? false;
  const name = scoped ? segments.slice(at + 1, at + 3).join("/") : segments[at + 1];
  if (at === -1 || !name) return undefined;
  return { name, file: segments.slice(at).join("/") };
}
