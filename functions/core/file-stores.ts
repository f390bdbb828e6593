/**
 * `$.files` calls (docs/file-stores.md): the runtime's {@link FileStoreCall}s, checked as hostile
 * input and served against the File Store of the run's project, which trusted code chose (a call
 * never names a project). Served inside `dataStoreService`, so they share its per-run limits.
 */
import type { Deps } from "#core/ports/deps";
import {
  FILE_STORE_URL_MS,
  type FileStoreCall,
  type FileStoreSigned,
  fileStorePath,
  type Json,
} from "#runtime/protocol";

/** Entries of one `$.files.dir()` page. */
export const FILE_STORE_LIST_PAGE = 1000;

type Bag = Record<string, unknown>;
const isBag = (value: unknown): value is Bag => typeof value === "object" && value !== null && !Array.isArray(value);

/** The call, checked, or why it is refused (in words). */
export function parseFileStoreCall(raw: unknown): FileStoreCall | string {
  if (!isBag(raw)) return "a File Store call must be an object";
  const { op, path, after } = raw;
  switch (op) {
    case "files.sign":
    case "files.delete": {
      const checked = fileStorePath(path);
      return "problem" in checked ? checked.problem : { op, path: checked.path };
    }
    case "files.dir": {
      const checked = fileStorePath(path, true);
      if ("problem" in checked) return checked.problem;
      if (after === undefined) return { op, path: checked.path };
      if (typeof after !== "string" || after.length > 2048) return "a File Store page must be named by its text";
      return { op, path: checked.path, after };
    }
    default:
      return "a File Store call must name a known method";
  }
}

/** Serves one checked call for `projectId`; throws what the store throws. */
export async function serveFileStoreCall(
  deps: Pick<Deps, "files" | "clock">,
  projectId: string,
  call: FileStoreCall,
): Promise<{ value?: Json }> {
  switch (call.op) {
    case "files.sign": {
      const expiresAtMs = deps.clock.nowMs() + FILE_STORE_URL_MS;
      const urls = await deps.files.urls(projectId, call.path, expiresAtMs);
      const signed: FileStoreSigned = { get_url: urls.getUrl, put_url: urls.putUrl, expires_at_ms: expiresAtMs };
      return { value: signed as unknown as Json };
    }
    case "files.delete":
      await deps.files.remove(projectId, call.path);
      return {};
    case "files.dir": {
      const page = await deps.files.list(projectId, call.path, call.after, FILE_STORE_LIST_PAGE);
      return { value: page as unknown as Json };
    }
  }
}

/** Whether a component's code names `files` at all, by its code's hash (bounded). */
const mentionsFiles = new Map<string, boolean>();
const MENTIONS_KEPT = 2000;

/**
 * Whether any of these components' code could reach `$.files`: its code holds the word `files`.
 * On AWS a run's File Store travels in its grant, whose sealing is a KMS call: runs whose code
 * never names `files` are not given one (locally nothing is sealed, and every run has its store).
 */
export function mayUseFiles(components: readonly { codeHash: string; code: string }[]): boolean {
  return components.some(({ codeHash, code }) => {
    let mentions = mentionsFiles.get(codeHash);
    if (mentions === undefined) {
      mentions = /\bfiles\b/.test(code);
      if (mentionsFiles.size >= MENTIONS_KEPT) mentionsFiles.delete(mentionsFiles.keys().next().value as string);
      mentionsFiles.set(codeHash, mentions);
    }
    return mentions;
  });
}
