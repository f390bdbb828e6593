import type { Scenario } from "../lib/scenario.ts";
import { awsDeploy } from "./aws-deploy.ts";
import { badInput } from "./bad-input.ts";
import { coldStart } from "./cold-start.ts";
import { deploy } from "./deploy.ts";
import { flood } from "./flood.ts";
import { footprint } from "./footprint.ts";
import { history } from "./history.ts";
import { ingest } from "./ingest.ts";
import { respond } from "./respond.ts";
import { scale } from "./scale.ts";
import { stream } from "./stream.ts";
import { fanout, webhook } from "./webhook.ts";
import { workflowChain, workflows } from "./workflows.ts";

/** Every scenario, in the order of issue 6's table; the opt-in ones (`optIn`) last. */
export const SCENARIOS: readonly Scenario[] = [
  ingest,
  respond,
  webhook,
  fanout,
  deploy,
  scale,
  stream,
  history,
  flood,
  badInput,
  workflows,
  workflowChain,
  footprint,
  coldStart,
  awsDeploy,
];
