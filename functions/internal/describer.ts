/**
 * The describer function: reads a component's metadata on AWS (`LambdaComponentHost.describe`).
 * The API function that receives the code bundles it (esbuild) and invokes this function with the
 * bundle's text. Here it is written to `/tmp` and evaluated in a child process, exactly as local
 * mode does it (`describeInSandbox`): `runtime-layer/sandbox-entry.ts` (bundled next to this file
 * as `sandbox-entry.mjs`) under Node's permission model, read access to two folders, an empty
 * environment (so not even this function's logging-only credentials), a heap cap and a time limit.
 *
 * One child per describe, killed after its answer: this function serves every owner's code, and
 * code of different owners never shares a process (DESIGN.md decision 3).
 */
import { randomUUID } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as z from "zod";
import { describeInSandbox } from "#adapters/local/sandbox-process";
import { sha256Hex } from "#core/sha256";
import type { DescribeReply } from "#runtime/sandbox-channel";

/** The event the describer takes: the component bundled to one ESM file (`#adapters/aws/source-bundle`). */
const describeEventSchema = z.object({
  kind: z.literal("describe"),
  code: z.string().min(1),
});

const ENTRY_PATH = fileURLToPath(new URL("./sandbox-entry.mjs", import.meta.url));
const LIMITS = { timeoutMs: 5000, heapMb: 128 };

/**
 * Lambda entry. A malformed event is a bug of the caller and fails the invocation; whatever the
 * component does is an answer (`{ok: false, error}`), never a failure of this function.
 */
export async function handler(event: unknown): Promise<DescribeReply> {
  const { code } = describeEventSchema.parse(event);
  // A fresh folder per request: the child may read it, and nothing else of other requests.
  const folder = join(tmpdir(), "sluice-describe", `${sha256Hex(code).slice(0, 16)}-${randomUUID()}`);
  const bundlePath = join(folder, "component.mjs");
  await mkdir(folder, { recursive: true });
  try {
    await writeFile(bundlePath, code);
    return await describeInSandbox(ENTRY_PATH, bundlePath, LIMITS);
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}
