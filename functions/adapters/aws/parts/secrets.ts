import { KMSClient } from "@aws-sdk/client-kms";
import type { AwsPart } from "../composition.ts";
import { KmsSecrets } from "../kms-secrets.ts";
import { lazy, required } from "../lazy-ports.ts";

/** Sealing and opening secret props (KMS): functions with the secrets key. */
export const part: AwsPart = {
  name: "secrets",
  build({ compute, client }) {
    return {
      secrets: lazy(
        "the secrets key",
        () =>
          new KmsSecrets({
            kms: client("kms", () => new KMSClient({})),
            keyId: required(compute.secretsKeyArn, "the secrets key", "access to the secrets key"),
          }),
      ),
    };
  },
};
