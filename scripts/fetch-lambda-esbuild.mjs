#!/usr/bin/env node
/**
 * Fetches esbuild's native binary for Lambda's architecture (`@esbuild/linux-arm64`, at the version
 * of the installed `esbuild`) into `.lambda-packages/`, where `cdk synth` copies it into the
 * functions that deploy sources (lib/constructs/lambda-esbuild.ts). npm cannot install it as a
 * dependency on another platform (EBADPLATFORM; as an optional dependency it is skipped), so it is
 * fetched with `npm pack`, checked against the integrity package-lock.json records for it, and
 * unpacked with its file modes (the binary must stay executable).
 *
 * Run by `postinstall` and by `npm run fetch:lambda-esbuild`. Without a network it warns and exits
 * 0: the deploying functions then bundle with esbuild-wasm, and `cdk synth` says so.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const name = "@esbuild/linux-arm64";
const target = join(root, ".lambda-packages", name);

const esbuild = join(root, "node_modules", "esbuild", "package.json");
if (!existsSync(esbuild)) {
  console.warn("fetch-lambda-esbuild: esbuild is not installed; nothing fetched");
  process.exit(0);
}
const { version } = JSON.parse(readFileSync(esbuild, "utf8"));
const installed = join(target, "package.json");
if (existsSync(installed) && JSON.parse(readFileSync(installed, "utf8")).version === version) process.exit(0);

const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8"));
const locked = lock.packages?.[`node_modules/${name}`];
if (locked?.version !== version || typeof locked.integrity !== "string") {
  // Nothing to check a download against: fetch nothing (cdk synth then warns).
  console.warn(`fetch-lambda-esbuild: package-lock.json records no ${name}@${version} (esbuild's optional dependency)`);
  process.exit(0);
}

const scratch = mkdtempSync(join(tmpdir(), "sluice-lambda-esbuild-"));
try {
  let packed;
  try {
    const out = execFileSync("npm", ["pack", `${name}@${version}`, "--pack-destination", scratch, "--json"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    packed = JSON.parse(out)[0];
  } catch (error) {
    console.warn(`fetch-lambda-esbuild: could not fetch ${name}@${version} (${String(error).split("\n")[0]});`);
    console.warn("the functions that deploy sources will bundle with esbuild-wasm until it is fetched");
    process.exit(0);
  }
  if (packed?.integrity !== locked.integrity) {
    console.error(`fetch-lambda-esbuild: ${name}@${version} does not match package-lock.json's integrity`);
    process.exit(1);
  }
  const unpacked = join(scratch, "unpacked");
  mkdirSync(unpacked);
  execFileSync("tar", ["-xzf", join(scratch, packed.filename), "-C", unpacked]);
  rmSync(target, { recursive: true, force: true });
  mkdirSync(dirname(target), { recursive: true });
  renameSync(join(unpacked, "package"), target);
  console.log(`fetch-lambda-esbuild: ${name}@${version} in .lambda-packages/`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
