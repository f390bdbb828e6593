/**
 * What a route file's `#aws-composition` and `#aws-parts/<name>` imports are everywhere but in a
 * route's Lambda bundle: stand-ins that load no SDK client and fail if used. esbuild resolves
 * `#aws-composition` to the AWS composition root under the `sluice-lambda` condition, which the
 * functions of routes are built with, and `#aws-parts/<name>` to the real part under
 * `sluice-aws-parts`, which only the functions of routes with parts are (`AwsImports` in
 * lib/constructs/sluice-function.ts): local mode and the tests import the same route files, and so
 * do the OpenAPI and `$default` functions, for every route's definition. Static imports rather than
 * `import()`: esbuild wraps what a dynamic import reaches in lazy initializers and keeps the whole
 * of each `export *` barrel it goes through, all of the DynamoDB client's commands, waiters and
 * paginators among them (docs/aws.md "Cold starts").
 */
import type { AwsPart, loadAwsDeps as awsDepsLoader } from "#adapters/aws/composition";

const message =
  'the AWS composition and its parts are bundled into Lambda functions only (esbuild conditions "sluice-lambda" and "sluice-aws-parts"); this is the stand-in that `#aws-composition` and `#aws-parts/*` resolve to elsewhere';

export const part: AwsPart = {
  get name(): never {
    throw new Error(message);
  },
  build() {
    throw new Error(message);
  },
};

export const loadAwsDeps: typeof awsDepsLoader = async () => {
  throw new Error(message);
};
