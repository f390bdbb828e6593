import type { Logger } from "#core/ports/logger";

/**
 * What a request line says. Never the query string (it can carry a webhook's URL or a cursor a
 * client treats as private), a header or a body; for a source's endpoint the path is
 * {@link ENDPOINT_LOG_PATH}, since the key in it is all it takes to send that source events.
 */
export interface RequestLine {
  method: string;
  path: string;
  /** Undefined when the connection closed before an answer started. */
  status: number | undefined;
  durationMs: number;
  requestId: string;
  /** The source (`dc_`) or workflow (`p_`) an endpoint request reached. */
  sourceId?: string | undefined;
  /** The connection closed before the answer was complete (a live stream always ends so). */
  aborted?: boolean;
}

/** The path an endpoint request is logged under: its key and the rest of its path are not logged. */
export const ENDPOINT_LOG_PATH = "/http/{key}";
/** The path a request to a paused run's URL is logged under: its secret is not logged. */
export const FLOW_LOG_PATH = "/flow/{run_id}/{secret}/{action}";
/** How a File Store file's URL is logged: its token is the authority to read or write the file. */
export const FILE_LOG_PATH = "/files/{token}/{name}";

/** One line per request, at info, the same on both platforms. */
export function logRequest(log: Logger, line: RequestLine): void {
  const owner = line.sourceId;
  // A workflow's HTTP trigger shares the endpoint path with sources: its id is named for what it is.
  const workflow = owner?.startsWith("p_") === true;
  log.info("request", {
    method: line.method,
    path: line.path,
    status: line.status,
    duration_ms: Math.round(line.durationMs * 10) / 10,
    request_id: line.requestId,
    source_id: workflow ? undefined : owner,
    workflow_id: workflow ? owner : undefined,
    aborted: line.aborted || undefined,
  });
}
