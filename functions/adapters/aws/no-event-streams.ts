/**
 * What Sluice's Lambda bundles have for `@smithy/core/event-streams` (an esbuild alias,
 * `SLUICE_ESBUILD_OPTIONS` in lib/constructs/sluice-function.ts): the SDK's event stream support,
 * refused. No operation a Sluice function calls streams events (Lambda's
 * `InvokeWithResponseStream` and S3's `SelectObjectContent` would). The SDK's protocol layer loads
 * the real module with `import()` for such an operation, and esbuild wraps every module an
 * `import()` reaches in a lazy initializer and keeps whole barrels behind its `export *`: 150-odd
 * of `@smithy/core`'s modules in a plain route's bundle, parsed twice, about 3 ms of its cold start
 * (docs/aws.md "Cold starts"). The Lambda and S3 clients still set up their (unused) marshaller
 * when they are made, so that part keeps the real module's shape; using it fails, naming this file.
 */

function refuse(): never {
  throw new Error(
    "AWS event streams are not bundled in Sluice's functions (functions/adapters/aws/no-event-streams.ts)",
  );
}

/** The marshaller the clients are made with: it refuses to be used. */
export const eventStreamSerdeProvider = (_options: unknown) => ({ serialize: refuse, deserialize: refuse });

/** As the real module's: the client's config gets its marshaller from its provider. */
export const resolveEventStreamSerdeConfig = <T extends { eventStreamSerdeProvider: (input: T) => unknown }>(
  input: T,
): T & { eventStreamMarshaller: unknown } =>
  Object.assign(input, { eventStreamMarshaller: input.eventStreamSerdeProvider(input) });

/** What the protocol layer loads for an event stream operation: it refuses to be made. */
export class EventStreamSerde {
  constructor() {
    refuse();
  }
}
