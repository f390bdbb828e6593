/** What one request (a webhook's POST, a `$.send.http`) came to: the status the receiver answered, or why there was none. */
export type WebhookSendResult = { status: number } | { error: string };

/**
 * Sends one webhook delivery (POST) or one `$.send.http` (its own method). Never rejects for a network failure: a refused connection, a
 * timeout, an unresolvable or refused address all come back as `{ error }`. Redirects are not
 * followed (a 3xx is a status like any other). Adapter: `Http1WebhookSender`
 * (`functions/adapters/http1-webhook-sender.ts`), on both platforms.
 */
export interface WebhookSender {
  post(
    url: string,
    headers: Readonly<Record<string, string>>,
    body: string,
    timeoutMs: number,
    /** An upper-case HTTP token. @default "POST" */
    method?: string,
  ): Promise<WebhookSendResult>;
}
