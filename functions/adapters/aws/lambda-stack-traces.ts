/**
 * The first module of every Sluice Lambda bundle (esbuild's `inject`, `SLUICE_ESBUILD_OPTIONS` in
 * lib/constructs/sluice-function.ts): stack traces name the TypeScript file and line, mapped by
 * the bundle's `index.mjs.map` only when a stack is formatted (an error logged, or reported by
 * Lambda's runtime), with the sandbox's `runtime-layer/lazy-source-maps.ts`. The functions no
 * longer run with `--enable-source-maps`, which parsed the whole map at every cold start, error or
 * not: 11-14 ms of a plain route's here (docs/aws.md "Cold starts", decision 473).
 */
import { installLazySourceMaps } from "#runtime/lazy-source-maps";

installLazySourceMaps();
