/**
 * The credentials of the SDK clients in Sluice's Lambda bundles: the function's environment,
 * where Lambda puts its role's credentials (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
 * `AWS_SESSION_TOKEN`). The bundles take this module for `@aws-sdk/credential-provider-node`
 * (an esbuild alias, `SLUICE_ESBUILD_OPTIONS` in lib/constructs/sluice-function.ts): the default
 * chain tries the environment first, and on Lambda stops there, but its other links (profiles,
 * SSO, web identity, process, container and instance metadata, with the STS and SSO clients they
 * carry) are 130 KB that every cold start parsed for nothing (docs/aws.md "Cold starts"). Local
 * mode and the `sluice` command never load this module: they do not use the AWS bundles.
 */
import { type FromEnvInit, fromEnv } from "@aws-sdk/credential-provider-env";

/** What the SDK's clients call for their credentials (`credentialDefaultProvider`), as the default chain's export. */
export const defaultProvider = (init: FromEnvInit = {}) => fromEnv(init);
