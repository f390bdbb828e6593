/**
 * How many File Store transfers (`GET`/`PUT /files/...`) local mode serves at once. Each holds a
 * file open beside its connection, so connections alone (capped at three quarters of the server's
 * open-files limit, connection-cap.ts) could otherwise take every descriptor the server keeps for
 * its own files and children: about 10,000 slow uploads would do it. A transfer past the cap is
 * answered 503 with `Retry-After` before its file is opened or its body read; one project may hold
 * at most half the slots, so one tenant's slow transfers leave the others theirs. A transfer whose
 * connection moves no byte for `idleMs` (30 s; cut between one and two of those) is cut, so a
 * client that stops reading or sending gives its slot back.
 */
import type { Socket } from "node:net";

/** Transfers served at once when the open-files limit is unknown (not Linux). */
export const DEFAULT_MAX_FILE_TRANSFERS = 256;

/** An eighth of the open-files limit, from 16 to 1,024 (past that, the disk is the limit). */
export function maxFileTransfersFor(openFiles: number | undefined): number {
  if (openFiles === undefined) return DEFAULT_MAX_FILE_TRANSFERS;
  return Math.min(1024, Math.max(16, Math.floor(openFiles / 8)));
}

/** How long a transfer's connection may move no byte before it is cut. */
export const FILE_TRANSFER_IDLE_MS = 30_000;

export class FileTransferSlots {
  readonly perProject: number;
  #inFlight = 0;
  readonly #byProject = new Map<string, number>();

  constructor(
    readonly max: number,
    readonly idleMs = FILE_TRANSFER_IDLE_MS,
  ) {
    this.perProject = Math.max(1, Math.ceil(max / 2));
  }

  /**
   * Cuts `socket` once it has moved no byte, in or out, for `idleMs` (checked every `idleMs`, so
   * after one to two of them); the function stops watching.
   */
  watchIdle(socket: Socket): () => void {
    let moved = socket.bytesRead + socket.bytesWritten;
    const timer = setInterval(() => {
      const now = socket.bytesRead + socket.bytesWritten;
      if (now === moved) socket.destroy();
      moved = now;
    }, this.idleMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /** A slot for one transfer of `project`, and the function that gives it back (once); none: full. */
  take(project: string): (() => void) | undefined {
    const held = this.#byProject.get(project) ?? 0;
    if (this.#inFlight >= this.max || held >= this.perProject) return undefined;
    this.#inFlight += 1;
    this.#byProject.set(project, held + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#inFlight -= 1;
      const left = (this.#byProject.get(project) ?? 1) - 1;
      if (left === 0) this.#byProject.delete(project);
      else this.#byProject.set(project, left);
    };
  }
}
