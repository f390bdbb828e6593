/**
 * Requests Sluice makes to an app's provider on an account's behalf: the OAuth token endpoint
 * (code exchange, refresh) and the app's test request. The provider is untrusted: an adapter
 * bounds the time and the size of the answer, follows no redirect, and (where private addresses
 * are not allowed) never connects to loopback, private or metadata addresses.
 *
 * Adapter: `NodeHttpProviderClient` (`functions/adapters/node-http-provider-client.ts`), on both
 * platforms.
 */
export interface ProviderRequest {
  /** An upper-case HTTP token (`GET`, `POST`). */
  method: string;
  url: string;
  headers: Readonly<Record<string, string>>;
  body?: string;
  /** Limit of the whole exchange, up to the last byte of the answer. */
  timeoutMs: number;
  /** Bytes of the answer read at most; a longer answer is an error. */
  maxResponseBytes: number;
}

/**
 * The provider's answer, or why there was none. An `error` never quotes the URL or the headers
 * (they may carry a token): it names the failure only.
 */
export type ProviderResponse = { status: number; contentType: string; body: string } | { error: string };

export interface ProviderHttp {
  /** Never rejects for a network failure, a timeout, a refused address or an oversized answer. */
  request(request: ProviderRequest): Promise<ProviderResponse>;
}
