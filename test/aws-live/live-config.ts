/**
 * What `npm run test:aws-live` needs from its environment (docs/aws.md, "The live test"), read in
 * one place: AWS credentials, the stage the stacks were deployed with, and a public URL that
 * reaches a webhook receiver the test runs on this machine. These are settings of the test, not
 * of Sluice: no function reads them (decision 384).
 */
import { isIP } from "node:net";
import { isForbiddenAddress } from "#adapters/address-guard";
import { STAGE_PATTERN, STAGE_RULE } from "#config/aws-compute-env";

/** The test's own variables. */
export const LIVE_ENV = {
  /** The stage of the deployed stacks (`cdk deploy -c stage=<stage>`), or `default` for none. */
  stage: "SLUICE_LIVE_STAGE",
  /** The public http(s) URL that forwards to the test's receiver (a tunnel, a reverse proxy). */
  receiverUrl: "SLUICE_LIVE_RECEIVER_URL",
  /** The port of 127.0.0.1 the test's receiver listens on, where that URL forwards to. */
  receiverPort: "SLUICE_LIVE_RECEIVER_PORT",
} as const;

/** The receiver's port when none is given. */
export const DEFAULT_RECEIVER_PORT = 8787;

/** The stage of a deploy without `-c stage`: stacks `SluiceStateful` and `SluiceService`. */
export const DEFAULT_STAGE = "default";

/** The AWS credentials' variables whose presence opts in, as the SDK reads them. */
const CREDENTIAL_VARIABLES = ["AWS_PROFILE", "AWS_ACCESS_KEY_ID"] as const;

export interface LiveSettings {
  readonly stage: string;
  /** The service stack's name: `<stage>-SluiceService`, or `SluiceService` for the default stage. */
  readonly serviceStack: string;
  readonly receiverUrl: string;
  readonly receiverPort: number;
  /** `AWS_REGION` or `AWS_DEFAULT_REGION` when set; otherwise the profile's, as the SDK finds it. */
  readonly region: string | undefined;
}

export type LiveConfig =
  /** No credentials: nothing to run against. */
  | { readonly kind: "skip"; readonly reason: string }
  /** Credentials, but the rest is missing or wrong: the run was asked for and cannot be made. */
  | { readonly kind: "invalid"; readonly problems: readonly string[] }
  | { readonly kind: "ready"; readonly settings: LiveSettings };

/** Reads the live test's configuration from `env` (pure: the unit tests give their own). */
export function liveConfig(env: Readonly<Record<string, string | undefined>>): LiveConfig {
  const given = (name: string) => {
    const value = env[name]?.trim();
    return value ? value : undefined;
  };
  if (!CREDENTIAL_VARIABLES.some((name) => given(name))) {
    return {
      kind: "skip",
      reason: `no AWS credentials in the environment (${CREDENTIAL_VARIABLES.join(" or ")}); the live test needs an account with Sluice deployed`,
    };
  }
  const problems: string[] = [];
  if (given("AWS_ACCESS_KEY_ID") && !given("AWS_SECRET_ACCESS_KEY") && !given("AWS_PROFILE")) {
    problems.push("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY");
  }

  const stage = given(LIVE_ENV.stage);
  if (stage === undefined) {
    problems.push(
      `${LIVE_ENV.stage} is not set: the stage the stacks were deployed with (-c stage=<stage>), or "${DEFAULT_STAGE}" without one`,
    );
  } else if (!STAGE_PATTERN.test(stage)) {
    problems.push(`${LIVE_ENV.stage} must be ${STAGE_RULE}, not "${stage}"`);
  }

  const receiverUrl = given(LIVE_ENV.receiverUrl);
  if (receiverUrl === undefined) {
    problems.push(
      `${LIVE_ENV.receiverUrl} is not set: a public http(s) URL that forwards to 127.0.0.1:<${LIVE_ENV.receiverPort}> on this machine (a Lambda function cannot reach 127.0.0.1)`,
    );
  } else {
    const problem = receiverUrlProblem(receiverUrl);
    if (problem) problems.push(`${LIVE_ENV.receiverUrl} ${problem}`);
  }

  const portText = given(LIVE_ENV.receiverPort);
  const receiverPort = portText === undefined ? DEFAULT_RECEIVER_PORT : Number(portText);
  if (!/^\d+$/.test(portText ?? "0") || !Number.isInteger(receiverPort) || receiverPort < 1 || receiverPort > 65_535) {
    problems.push(`${LIVE_ENV.receiverPort} must be a TCP port (1 to 65535), not "${portText}"`);
  }

  if (problems.length > 0 || stage === undefined || receiverUrl === undefined) return { kind: "invalid", problems };
  return {
    kind: "ready",
    settings: {
      stage,
      serviceStack: stage === DEFAULT_STAGE ? "SluiceService" : `${stage}-SluiceService`,
      receiverUrl,
      receiverPort,
      region: given("AWS_REGION") ?? given("AWS_DEFAULT_REGION"),
    },
  };
}

/**
 * Why `url` cannot be the receiver's public URL, or undefined. The deliverer refuses loopback,
 * private and link-local addresses (docs/webhooks.md), so such a URL would only fail later.
 */
function receiverUrlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `is not a URL: "${url}"`;
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:")
    return `must be http or https, not ${parsed.protocol}`;
  const host = parsed.hostname.replace(/^\[|\]$/g, "");
  // A name is resolved by the deliverer at delivery; only a literal address or localhost is known now.
  if (host === "localhost" || host.endsWith(".localhost") || (isIP(host) !== 0 && isForbiddenAddress(host))) {
    return `must be public: a deployed deliverer refuses ${host}`;
  }
  return undefined;
}
