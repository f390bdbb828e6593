/**
 * The address guard of trusted outbound requests (webhooks, `component_url`, workflow sends). It
 * is the runtime layer's own (`runtime-layer/address-guard.ts`), where an `http_request` prop's
 * `execute()` uses it too: one list of forbidden addresses for every request Sluice makes.
 */
export { FORBIDDEN_ADDRESS, guardedLookup, isForbiddenAddress } from "#runtime/address-guard";
