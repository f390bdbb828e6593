import { isAbsolute, relative } from "node:path";

/**
 * How a message names `path` (absolute, as configuration holds paths): relative to the working
 * dir, after `prefix`, when it lies within it (`./.sluice`), else as it is.
 */
export function nearPath(path: string, prefix = ""): string {
  const near = relative(process.cwd(), path);
  return near === "" || near.startsWith("..") || isAbsolute(near) ? path : `${prefix}${near}`;
}
