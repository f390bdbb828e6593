/**
 * `$.files`: the project's File Store as the original's workflows see it (docs/file-stores.md;
 * PD:types `IApi`/`IFile`). The store is not here: trusted code answers a {@link FileStoreCall}
 * for each file's URLs, a folder's listing and a deletion, and a file's content travels by HTTP
 * to and from the URLs it answered (an S3 object on AWS, Sluice's own `/files/...` locally).
 * Paths are checked here too, so wrong ones fail at the call with the same words.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { stat } from "node:fs/promises";
import { PassThrough, Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { DataStoreCaller } from "./data-store-client.ts";
import { type FileStoreCall, type FileStoreEntry, type FileStoreSigned, fileStorePath, type Json } from "./protocol.ts";

type Bag = Record<string, unknown>;

/** `type` of a file's JSON description, which `$.files.openDescriptor` takes back. */
export const FILE_DESCRIPTOR_TYPE = "PipedreamProjectFile";

/** Taken when the runtime loads: component code may replace the globals later. */
const fetchOnce = globalThis.fetch;
const wait = globalThis.setTimeout;

/** Tries of a transfer the store answers 503 (busy: local mode's cap, S3's SlowDown), the first included. */
const BUSY_TRIES = 5;

/**
 * One transfer to or from the store. A 503 is tried again after its `Retry-After` (at most 2 s) or
 * 0.2, 0.4, 0.8, 1.6 s, when the body can be sent again (none, or a Buffer); a stream's can not.
 */
async function transfer(url: string, init?: RequestInit): Promise<Response> {
  const repeatable = init?.body === undefined || Buffer.isBuffer(init.body);
  for (let tried = 1; ; tried += 1) {
    const response = await fetchOnce(url, init);
    if (response.status !== 503 || !repeatable || tried >= BUSY_TRIES) return response;
    await response.body?.cancel();
    const header = response.headers.get("retry-after");
    const said = header === null ? Number.NaN : Number(header);
    const delayMs = Number.isFinite(said) && said >= 0 ? Math.min(said, 2) * 1000 : 100 * 2 ** tried;
    await new Promise((resolve) => wait(resolve, delayMs));
  }
}

/** URLs are asked for again when they have less than this left. */
const URL_MARGIN_MS = 60_000;

/** A content length given as a whole number of bytes, or undefined. */
function knownLength(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

function fileStoreError(message: string): Error {
  return Object.assign(new Error(message), { name: "FileStoreError" });
}

function checkedPath(raw: unknown, folder = false): string {
  const checked = fileStorePath(raw, folder);
  if ("problem" in checked) throw new TypeError(checked.problem);
  return checked.path;
}

type Ask = (call: FileStoreCall) => Promise<Json | undefined>;

/** The `$.files` of one run; `send` reaches trusted code (absent: the run has no File Store). */
export function createFilesApi(send: DataStoreCaller | undefined): Bag {
  const ask: Ask = async (call) => {
    if (!send) {
      // On AWS a run reaches trusted code only with a grant, made for code that names `files`.
      throw fileStoreError(
        "$.files: this run has no File Store (workflow steps and actions run in a project have one; on AWS, runs whose code names `files`)",
      );
    }
    const reply = await send(call);
    if (reply.ok) return reply.value;
    throw Object.assign(new Error(reply.error.message), { name: reply.error.name });
  };
  async function* dir(path?: unknown) {
    const folder = checkedPath(path ?? "", true);
    let after: string | undefined;
    do {
      const call: FileStoreCall =
        after === undefined ? { op: "files.dir", path: folder } : { op: "files.dir", path: folder, after };
      const page = (await ask(call)) as { entries: FileStoreEntry[]; next?: string } | undefined;
      for (const entry of page?.entries ?? []) {
        const isFile = entry.type === "file";
        yield {
          path: entry.path,
          name: entry.name,
          isFile: () => isFile,
          isDirectory: () => !isFile,
          ...(entry.size === undefined ? {} : { size: entry.size }),
          ...(entry.modifiedAtMs === undefined ? {} : { modifiedAt: new Date(entry.modifiedAtMs) }),
          ...(isFile ? { file: new ProjectFile(entry.path, ask) } : {}),
        };
      }
      after = page?.next;
    } while (after !== undefined);
  }
  return {
    open: (path: unknown) => new ProjectFile(checkedPath(path), ask),
    openDescriptor: (descriptor: unknown) => {
      const bag = (typeof descriptor === "object" && descriptor !== null ? descriptor : {}) as Bag;
      if (bag.type !== FILE_DESCRIPTOR_TYPE) {
        throw new TypeError(`$.files.openDescriptor expects a file's description (type "${FILE_DESCRIPTOR_TYPE}")`);
      }
      // The description's URLs may be old or made up: the file's own are asked for when needed.
      return new ProjectFile(checkedPath(bag.path), ask);
    },
    dir,
  };
}

/** One file of the project's File Store (the original's `File`). */
class ProjectFile {
  #urls: FileStoreSigned | undefined;
  readonly #ask: Ask;

  constructor(
    readonly path: string,
    ask: Ask,
  ) {
    this.#ask = ask;
  }

  async #signed(): Promise<FileStoreSigned> {
    if (!this.#urls || this.#urls.expires_at_ms - Date.now() < URL_MARGIN_MS) {
      this.#urls = (await this.#ask({ op: "files.sign", path: this.path })) as unknown as FileStoreSigned;
    }
    return this.#urls;
  }

  /** The file's content as a response; a missing file is a clear error. */
  async #download(): Promise<Response> {
    const response = await transfer((await this.#signed()).get_url);
    if (response.ok) return response;
    await response.body?.cancel();
    if (response.status === 404) throw fileStoreError(`$.files: there is no file "${this.path}" in the File Store`);
    throw fileStoreError(`$.files: reading "${this.path}" failed with HTTP ${response.status}`);
  }

  async #upload(body: Buffer | Readable, contentType: unknown, length: number): Promise<this> {
    const size = Buffer.isBuffer(body) ? body.length : length;
    const headers: Record<string, string> = { "content-length": String(size) };
    if (typeof contentType === "string" && contentType !== "") headers["content-type"] = contentType;
    const init: RequestInit & { duplex?: "half" } = { method: "PUT", headers };
    if (Buffer.isBuffer(body)) init.body = body;
    else {
      init.body = Readable.toWeb(body) as unknown as ReadableStream;
      init.duplex = "half";
    }
    const response = await transfer((await this.#signed()).put_url, init);
    const said = (await response.text()).slice(0, 300);
    if (!response.ok)
      throw fileStoreError(
        `$.files: writing "${this.path}" failed with HTTP ${response.status}${said ? `: ${said}` : ""}`,
      );
    return this;
  }

  async toUrl(): Promise<string> {
    return (await this.#signed()).get_url;
  }

  async toBuffer(): Promise<Buffer> {
    return Buffer.from(await (await this.#download()).arrayBuffer());
  }

  async toEncodedString(encoding: BufferEncoding = "utf8", start?: number, end?: number): Promise<string> {
    return (await this.toBuffer()).toString(encoding, start, end);
  }

  async createReadStream(): Promise<Readable> {
    const response = await this.#download();
    return response.body ? Readable.fromWeb(response.body as never) : Readable.from([]);
  }

  async toFile(localFilePath: string): Promise<this> {
    const response = await this.#download();
    const body = response.body ? Readable.fromWeb(response.body as never) : Readable.from([]);
    await pipeline(body, createWriteStream(localFilePath));
    return this;
  }

  async fromFile(localFilePath: string, contentType?: string): Promise<this> {
    const { size } = await stat(localFilePath);
    return this.#upload(createReadStream(localFilePath), contentType, size);
  }

  async fromUrl(url: string, options?: RequestInit): Promise<this> {
    // The component's own fetch: the URL is the component's, reached as its own requests are.
    const response = await globalThis.fetch(url, options);
    if (!response.ok) {
      await response.body?.cancel();
      throw fileStoreError(`$.files: ${url.slice(0, 200)} answered HTTP ${response.status}`);
    }
    const type = response.headers.get("content-type");
    const length = knownLength(Number(response.headers.get("content-length") ?? Number.NaN));
    // With its length known the download streams on to the store; without, it is read whole first.
    if (length !== undefined && response.body) {
      return this.#upload(Readable.fromWeb(response.body as never), type, length);
    }
    return this.#upload(Buffer.from(await response.arrayBuffer()), type, Number.NaN);
  }

  async fromReadableStream(stream: NodeJS.ReadableStream, contentType?: string, contentLength?: number): Promise<this> {
    const length = knownLength(contentLength);
    if (length !== undefined) {
      return this.#upload(Readable.from(stream as AsyncIterable<Buffer>), contentType, length);
    }
    const chunks: Buffer[] = [];
    for await (const chunk of stream as AsyncIterable<Buffer | string>) chunks.push(Buffer.from(chunk));
    return this.#upload(Buffer.concat(chunks), contentType, Number.NaN);
  }

  async createWriteStream(contentType?: string, contentLength?: number): Promise<Writable> {
    const length = knownLength(contentLength);
    if (length !== undefined) {
      // Its length known, what is written streams on to the store; the stream finishes once stored.
      const through = new PassThrough();
      const upload = this.#upload(through, contentType, length);
      upload.catch(() => {});
      return new Writable({
        write(chunk: Buffer, _encoding, done) {
          if (through.write(chunk)) done();
          else through.once("drain", () => done());
        },
        final(done) {
          through.end();
          upload.then(() => done(), done);
        },
        destroy(error, done) {
          through.destroy(error ?? undefined);
          done(error);
        },
      });
    }
    // Without it, what is written is gathered, then sent as one upload at the end (an S3 PUT needs its length).
    const chunks: Buffer[] = [];
    return new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(Buffer.from(chunk));
        done();
      },
      final: (done) => {
        const content = Buffer.concat(chunks);
        this.#upload(content, contentType, content.length).then(() => done(), done);
      },
    });
  }

  async delete(): Promise<void> {
    await this.#ask({ op: "files.delete", path: this.path });
  }

  /**
   * The file's description: what a step returns or exports of it. Its URL to read once known, never
   * the one to write (a description travels to later steps, events and answers).
   */
  toJSON(): Json {
    return {
      type: FILE_DESCRIPTOR_TYPE,
      path: this.path,
      ...(this.#urls ? { get_url: this.#urls.get_url, expires_at_ms: this.#urls.expires_at_ms } : {}),
    };
  }
}
