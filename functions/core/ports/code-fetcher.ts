/**
 * Fetches component code from a `component_url`. Adapter: `UrlCodeFetcher` (http and https, a size
 * limit, a timeout, and on AWS a guard against private, loopback and metadata addresses).
 */
export interface CodeFetcher {
  /**
   * The text at `url`.
   * @throws DomainError `validation` on field `component_url` explaining why it could not be fetched.
   */
  fetchCode(url: string): Promise<string>;
}
