/**
 * The error of code that cannot be bundled or loaded, as the API reports it: a `validation` error
 * on `component_code`. Shared by the local sandbox's bundler and the AWS source bundler; imports
 * nothing but types of esbuild, so a Lambda bundling this file does not pull esbuild in.
 */
import type { Message } from "esbuild";
import { DomainError } from "#core/errors";

const FIELD = "component_code";

export const invalidCode = (message: string) =>
  new DomainError("validation", `${FIELD}: ${message}`, [{ field: FIELD, message }]);

/**
 * What a failed esbuild `build` becomes: its first message with the line and column in the user's
 * source. A plugin that threw a DomainError (a package that cannot be installed) keeps its own
 * error; anything that is not a build failure is returned as it is.
 */
export function compileError(error: unknown): unknown {
  const first = (error as { errors?: Message[] }).errors?.[0];
  if (!first) return error;
  const detail = first.detail as { name?: unknown; code?: unknown } | undefined;
  if (detail?.name === "DomainError" && typeof detail.code === "string") return detail;
  const where = first.location ? ` (line ${first.location.line}, column ${first.location.column + 1})` : "";
  return invalidCode(`${first.text}${where}`);
}
