import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { signWebhookBody, standardWebhookSignature } from "#core/webhook-signature";

/** The receiver-side `verify` function exactly as the README shows it. */
function readmeVerify(): (secret: string, header: string, rawBody: string, toleranceSec?: number) => boolean {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  const block =
    /```js\n(import \{ createHmac, timingSafeEqual \} from "node:crypto";\nfunction verify[\s\S]*?)```/.exec(readme);
  if (!block?.[1]) throw new Error("the README has no verify example");
  const body = block[1].replace(/^import .*\n/, "");
  const crypto = createRequire(import.meta.url)("node:crypto");
  return new Function("createHmac", "timingSafeEqual", `${body}\nreturn verify;`)(
    crypto.createHmac,
    crypto.timingSafeEqual,
  );
}

describe("the README's webhook signature example", () => {
  const verify = readmeVerify();
  const secret = "whsec_readme-example";
  const body = JSON.stringify({ id: "1795176000123-0", event: { hello: "world" } });
  const now = Math.floor(Date.now() / 1000);

  it("accepts what Sluice signs", () => {
    expect(verify(secret, signWebhookBody(secret, now, body), body)).toBe(true);
  });

  it("refuses a changed body, another secret, and an old timestamp", () => {
    const header = signWebhookBody(secret, now, body);
    expect(verify(secret, header, body.replace("world", "w0rld"))).toBe(false);
    expect(verify("whsec_other", header, body)).toBe(false);
    expect(verify(secret, signWebhookBody(secret, now - 3600, body), body)).toBe(false);
    expect(verify(secret, "t=abc,v1=00", body)).toBe(false);
  });
});

/** The README's Standard Webhooks example, run with the real package, on `secret`, `rawBody` and `headers`. */
function readmeStandardVerify(): (secret: string, rawBody: string, headers: Record<string, string>) => unknown {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  const block = /```js\n(import \{ Webhook \} from "standardwebhooks";\n[\s\S]*?)```/.exec(readme);
  if (!block?.[1]) throw new Error("the README has no Standard Webhooks example");
  const body = block[1].replace(/^import .*\n/, "");
  return new Function("Webhook", "secret", "rawBody", "headers", `${body}\nreturn envelope;`).bind(null, Webhook);
}

describe("the README's Standard Webhooks example", () => {
  const verify = readmeStandardVerify();
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  const body = JSON.stringify({ id: "1795176000123-0", event: { hello: "world" } });
  const now = Math.floor(Date.now() / 1000);
  const headers = (signedWith: string, timestamp = now) => ({
    "webhook-id": "dlv_01kbx3ma0b1c2d3e4f5g6h7j8k",
    "webhook-timestamp": String(timestamp),
    "webhook-signature": standardWebhookSignature(signedWith, "dlv_01kbx3ma0b1c2d3e4f5g6h7j8k", timestamp, body),
  });

  it("verifies what Sluice signs and answers the envelope", () => {
    expect(verify(secret, body, headers(secret))).toEqual(JSON.parse(body));
  });

  it("throws for another secret, a changed body or an old timestamp", () => {
    expect(() => verify(secret, body, headers(`whsec_${randomBytes(32).toString("base64")}`))).toThrow();
    expect(() => verify(secret, body.replace("world", "w0rld"), headers(secret))).toThrow();
    expect(() => verify(secret, body, headers(secret, now - 3600))).toThrow();
  });
});
