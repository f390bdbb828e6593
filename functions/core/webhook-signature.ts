/**
 * Webhook signatures (docs/webhooks.md "Verifying a delivery"): Sluice's own header and, beside
 * it, the Standard Webhooks 1.0 headers ({@link STANDARD_WEBHOOK_HEADERS}). Sluice's signed text is
 * `${timestamp}.${body}`: the unix seconds of the attempt, a dot, and the exact bytes of the body.
 * The key is the webhook's signing secret as UTF-8, exactly as shown at creation. The header is
 *
 *   x-sluice-signature: t=<unix seconds>,v1=<hex HMAC-SHA256>
 *
 * Binding the timestamp into the signed text lets a receiver refuse replays of an old request;
 * several `v1=` values may be present (a receiver checks any of them), which leaves room for
 * signing with two secrets while one is rotated.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export const SIGNATURE_HEADER = "x-sluice-signature";

/**
 * The headers of Standard Webhooks 1.0 (standardwebhooks.com), sent beside Sluice's own so a
 * receiver can verify deliveries with that spec's libraries (`new Webhook(secret).verify(body,
 * headers)`): `webhook-id` (the delivery id, the same on every attempt), `webhook-timestamp`
 * (unix seconds of the attempt) and `webhook-signature`.
 */
export const STANDARD_WEBHOOK_HEADERS = Object.freeze({
  id: "webhook-id",
  timestamp: "webhook-timestamp",
  signature: "webhook-signature",
});

const SECRET_PREFIX = "whsec_";

/**
 * The key of a `whsec_` secret as Standard Webhooks decodes it: the part after `whsec_`, base64
 * decoded. Node's decoder also reads the URL-safe alphabet, so secrets made before Sluice issued
 * standard base64 (`-` and `_`, no padding) give the same 32 bytes.
 */
export function standardWebhookKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, "base64");
}

/**
 * The `webhook-signature` value: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` keyed by
 * {@link standardWebhookKey}. Several space-separated signatures are allowed by the spec; Sluice
 * sends one.
 */
export function standardWebhookSignature(secret: string, id: string, timestampSec: number, body: string): string {
  const mac = createHmac("sha256", standardWebhookKey(secret))
    .update(`${id}.${timestampSec}.`, "utf8")
    .update(body, "utf8")
    .digest("base64");
  return `v1,${mac}`;
}

/** Hex HMAC-SHA256 of `${timestampSec}.${body}` under `secret`. */
export function webhookSignatureHex(secret: string, timestampSec: number, body: string): string {
  return createHmac("sha256", secret).update(`${timestampSec}.`, "utf8").update(body, "utf8").digest("hex");
}

/** The value of the `x-sluice-signature` header for one attempt. */
export function signWebhookBody(secret: string, timestampSec: number, body: string): string {
  return `t=${timestampSec},v1=${webhookSignatureHex(secret, timestampSec, body)}`;
}

/** The timestamp and `v1` signatures of a header, or undefined when it is malformed. */
export function parseSignatureHeader(header: string): { timestampSec: number; signatures: string[] } | undefined {
  let timestampSec: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const separator = part.indexOf("=");
    if (separator < 0) continue;
    const key = part.slice(0, separator).trim();
    const value = part.slice(separator + 1).trim();
    if (key === "t" && /^\d{1,12}$/.test(value)) timestampSec = Number(value);
    else if (key === "v1" && /^[0-9a-f]{64}$/i.test(value)) signatures.push(value.toLowerCase());
  }
  if (timestampSec === undefined || signatures.length === 0) return undefined;
  return { timestampSec, signatures };
}

/**
 * True when `header` carries a valid signature of `body` under `secret` whose timestamp is within
 * `toleranceSec` of `nowSec`. `body` must be the raw request body, byte for byte as received.
 */
export function verifyWebhookSignature(
  secret: string,
  header: string | undefined,
  body: string,
  toleranceSec: number,
  nowSec: number,
): boolean {
  if (header === undefined) return false;
  const parsed = parseSignatureHeader(header);
  if (!parsed) return false;
  if (Math.abs(nowSec - parsed.timestampSec) > toleranceSec) return false;
  const expected = Buffer.from(webhookSignatureHex(secret, parsed.timestampSec, body), "hex");
  return parsed.signatures.some((signature) => timingSafeEqual(Buffer.from(signature, "hex"), expected));
}
