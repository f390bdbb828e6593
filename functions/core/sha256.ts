import { createHash } from "node:crypto";

/** Hex SHA-256 of a text (UTF-8): API key hashes, `code_hash`, content-addressed bundles. */
export const sha256Hex = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

/** Base64url SHA-256 of a text (UTF-8): the PKCE S256 code challenge of a verifier (RFC 7636). */
export const sha256Base64url = (text: string) => createHash("sha256").update(text, "utf8").digest("base64url");
