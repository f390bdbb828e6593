import { LambdaClient } from "@aws-sdk/client-lambda";
import type { AwsPart } from "../composition.ts";
import { LambdaEventPurger } from "../lambda-event-purger.ts";
import { lazy, required } from "../lazy-ports.ts";

/** The start of a background purge (an asynchronous invoke of the event purger): `access.eventPurges`. */
export const part: AwsPart = {
  name: "purger",
  build({ compute, client }) {
    return {
      purger: lazy(
        "the event purger",
        () =>
          new LambdaEventPurger({
            lambda: client("lambda", () => new LambdaClient({})),
            functionName: required(
              compute.eventPurgerFunction,
              "the event purger",
              "the event purger's name (access.eventPurges)",
            ),
          }),
      ),
    };
  },
};
