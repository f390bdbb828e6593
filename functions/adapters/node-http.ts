/**
 * Node's `http` module, taken with `process.getBuiltinModule` rather than `import`. On Node 22
 * (Lambda's runtime), importing `node:http` as an ES module builds its ESM facade, which reads
 * every export, and the `WebSocket` family of getters Node 22 added to it loads undici: about
 * 60 ms of CPU at every cold start of a function that bundles one of these adapters (docs/aws.md
 * "Cold starts"). It is the same module object; types still come from `import type`.
 */
export const nodeHttp = process.getBuiltinModule("node:http");
