/**
 * What a route file's `#aws-parts/<name>` import is everywhere but in a Lambda bundle: a stand-in
 * that loads no SDK client. The import resolves to the real part (`parts/<name>.ts`) only under
 * esbuild's `sluice-lambda` condition, which every Lambda bundle is built with
 * (`LAMBDA_CONDITIONS` in lib/constructs/sluice-function.ts); local mode, the tests and the
 * OpenAPI document import the same route files and get this. Static imports rather than
 * `import()`: esbuild wraps what a dynamic import reaches in lazy initializers and keeps the
 * whole of each `export *` barrel it goes through, all of the DynamoDB client's commands,
 * waiters and paginators among them (docs/aws.md "Cold starts").
 */
import type { AwsPart } from "#adapters/aws/composition";

const message =
  'the AWS parts are bundled into Lambda functions only (esbuild condition "sluice-lambda"); this is the stand-in that `#aws-parts/*` resolves to elsewhere';

export const part: AwsPart = {
  get name(): never {
    throw new Error(message);
  },
  build() {
    throw new Error(message);
  },
};
