import { createHash } from "node:crypto";

/** Hex SHA-256 of a text (UTF-8): API key hashes, `code_hash`, content-addressed bundles. */
export const sha256Hex = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");
