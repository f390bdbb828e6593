/**
 * Reading an npm package tarball (`npm pack`'s `.tgz`: a gzipped tar of `package/<path>`) into
 * memory, for `sluice registry add`. A tarball is untrusted: only regular files are kept (links,
 * devices and folders are skipped), every path must stay below `package/` (no `..`, no absolute
 * path, no backslash), and the archive is bounded before anything is written to disk.
 */
import { gunzipSync } from "node:zlib";

/** Largest unpacked archive: registry packages are tens to hundreds of KiB. */
export const MAX_TARBALL_BYTES = 64 * 1024 * 1024;
/** Most files kept from one archive. */
export const MAX_TARBALL_FILES = 20_000;

const BLOCK = 512;
/** Regular files: `0`, and `\0` in archives older than ustar. */
const REGULAR = new Set(["0", "\0"]);

export class PackageTarballError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PackageTarballError";
  }
}

/**
 * The regular files of the package tarball `gz`, by their path below `package/` (`/`-separated).
 * Throws {@link PackageTarballError} for an archive that is not one, too large, or names a file
 * outside `package/`.
 */
export function unpackPackageTarball(gz: Uint8Array): Map<string, Buffer> {
  let tar: Buffer;
  try {
    tar = gunzipSync(gz, { maxOutputLength: MAX_TARBALL_BYTES });
  } catch (error) {
    const tooLarge = (error as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE";
    throw new PackageTarballError(
      tooLarge ? `the package is larger than ${MAX_TARBALL_BYTES} bytes unpacked` : "not a gzipped tarball",
    );
  }
  const files = new Map<string, Buffer>();
  // A pax (`x`) or GNU (`L`) header gives the next entry's long path.
  let longPath: string | undefined;
  for (let at = 0; at + BLOCK <= tar.length; ) {
    const header = tar.subarray(at, at + BLOCK);
    if (header.every((byte) => byte === 0)) break;
    const size = octal(header, 124, 12);
    const type = String.fromCharCode(header[156] ?? 0);
    const dataAt = at + BLOCK;
    if (size === undefined || dataAt + size > tar.length) throw new PackageTarballError("not a valid tarball");
    const data = tar.subarray(dataAt, dataAt + size);
    at = dataAt + Math.ceil(size / BLOCK) * BLOCK;
    if (type === "x") {
      longPath = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(data.toString("utf8"))?.[1] ?? longPath;
      continue;
    }
    if (type === "L") {
      longPath = text(data, 0, data.length);
      continue;
    }
    const prefix = text(header, 345, 155);
    const name = longPath ?? (prefix ? `${prefix}/${text(header, 0, 100)}` : text(header, 0, 100));
    longPath = undefined;
    if (!REGULAR.has(type)) continue;
    const path = packagePath(name);
    if (files.size >= MAX_TARBALL_FILES)
      throw new PackageTarballError(`the package has over ${MAX_TARBALL_FILES} files`);
    files.set(path, Buffer.from(data));
  }
  return files;
}

/**
 * `name` below the archive's top folder (`package/` as npm packs it; any one top folder is
 * accepted, as npm does), refused when it could land anywhere else once written.
 */
function packagePath(name: string): string {
  const parts = name.split("/");
  const below = parts.slice(1);
  const safe =
    parts.length > 1 &&
    !name.includes("\\") &&
    !name.includes("\0") &&
    !name.startsWith("/") &&
    below.length > 0 &&
    below.every((part) => part !== "" && part !== "." && part !== "..");
  if (!safe) throw new PackageTarballError(`the package names a file outside itself: ${JSON.stringify(name)}`);
  return below.join("/");
}

function text(buffer: Buffer, offset: number, length: number): string {
  const raw = buffer.subarray(offset, offset + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end < 0 ? raw.length : end).toString("utf8");
}

function octal(buffer: Buffer, offset: number, length: number): number | undefined {
  const digits = text(buffer, offset, length).trim();
  return /^[0-7]+$/.test(digits) ? Number.parseInt(digits, 8) : digits === "" ? 0 : undefined;
}
