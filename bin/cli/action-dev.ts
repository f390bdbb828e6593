import { basename } from "node:path";
import { coerceProps } from "./args.ts";
import { type ApiClient, type Component, type Page, unreachable, type Workflow, type WorkflowRun } from "./client.ts";
import type { Io } from "./command.ts";
import { runLines } from "./commands/events.ts";
import type { ComponentBody } from "./component-files.ts";
import { CliError } from "./errors.ts";
import { printJson, printText } from "./output.ts";

/*
 * `sluice dev` on an action (the original's `pd dev` runs sources only, a long-standing ask): the
 * action is the first step of a workflow made for the session, whose HTTP trigger answers with a
 * custom response, and whose second step answers with what the action gave (`steps.<action>`:
 * its return value and exports). Each run triggers that endpoint with the event and prints the run.
 */

/** The action's namespace in the session's workflow. */
export const ACTION_STEP = "action";
/** The header the answering step sets, so an answer the action gave itself is told apart. */
const OUTPUTS_HEADER = "x-sluice-dev-outputs";
const ANSWER_STEP = `export default defineComponent({
  async run({ steps, $ }) {
    await $.respond({ status: 200, headers: { "${OUTPUTS_HEADER}": "1" }, body: steps.${ACTION_STEP} ?? {} });
  },
});`;

export interface ActionDevOptions {
  props: Record<string, string>;
  /** The trigger event's body, as JSON. */
  event: unknown;
  json: boolean;
  name?: string;
}

/** The workflow steps for `component` with the props given on the command line. */
function stepsFor(component: Component, props: Record<string, string>) {
  return [
    { namespace: ACTION_STEP, component_id: component.id, props: coerceProps(props, component.configurable_props) },
    { namespace: "sluice_dev_answer", component_code: ANSWER_STEP },
  ];
}

export interface ActionDev {
  readonly workflow: Workflow;
  /** Saves the file's new code and puts it on the workflow's first step. */
  update(read: ComponentBody): Promise<void>;
  /** Triggers one run with the event and prints it. */
  run(): Promise<void>;
  /** Deletes the session's workflow (the saved action stays). */
  close(): Promise<void>;
}

/** Creates the session's workflow around the saved action `component`. */
export async function startActionDev(
  api: ApiClient,
  io: Io,
  file: string,
  component: Component,
  options: ActionDevOptions,
): Promise<ActionDev> {
  const workflow = (
    await api.call<{ data: Workflow }>("POST", "/workflows", {
      body: {
        settings: { name: options.name ?? `dev ${basename(file)}`, auto_deploy: true },
        steps: stepsFor(component, options.props),
        triggers: [{ type: "http", props: { custom_response: true } }],
      },
    })
  ).data;
  const endpoint = (workflow.triggers[0] as { endpoint_url?: string } | undefined)?.endpoint_url ?? "";
  return {
    workflow,
    async update(read) {
      const saved = (await api.call<{ data: Component }>("POST", "/components", { body: read.body })).data;
      if (saved.type !== "action") throw new CliError(`${basename(file)} is no longer an action`);
      await api.call("PUT", `/workflows/${workflow.id}`, { body: { steps: stepsFor(saved, options.props) } });
    },
    async run() {
      let answer: Response;
      let text: string;
      try {
        answer = await fetch(endpoint, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(options.event),
        });
        text = await answer.text();
      } catch (error) {
        throw unreachable(`the workflow's endpoint ${endpoint}`, error);
      }
      const run = (await api.call<Page<WorkflowRun>>("GET", `/workflows/${workflow.id}/runs`, { query: { limit: 1 } }))
        .data[0];
      const outputs = answer.headers.get(OUTPUTS_HEADER) === "1" ? outputsOf(text) : undefined;
      const own = outputs ? undefined : { status: answer.status, body: text };
      if (options.json) printJson(io, { run, outputs, answer: own });
      else printText(io, actionRunLines(run, outputs, own));
    },
    async close() {
      await api.call("DELETE", `/workflows/${workflow.id}`);
    },
  };
}

/** The answering step's body: the action's return value and exports, as JSON. */
function outputsOf(text: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A run of the action as text: the run as `sluice logs` shows it (its line, its log lines, its
 * error), then what the action gave: its return value, its exports but `$summary`, its summary,
 * an exit's reason, or the answer it gave itself.
 */
export function actionRunLines(
  run: WorkflowRun | undefined,
  outputs: Record<string, unknown> | undefined,
  answer: { status: number; body: string } | undefined,
): string {
  if (!run) return `no run was recorded${answer ? ` (the endpoint answered ${answer.status} ${answer.body})` : ""}\n`;
  let text = `${runLines(run)}\n`;
  if (outputs) {
    const { $return_value: returned, ...exports } = outputs;
    if ("$return_value" in outputs) text += `  return  ${JSON.stringify(returned)}\n`;
    for (const [name, value] of Object.entries(exports))
      if (name !== "$summary") text += `  export  ${name} = ${JSON.stringify(value)}\n`;
  } else if (answer && run.status === "success") text += `  answer  ${answer.status} ${answer.body}\n`;
  const summary = run.steps[0]?.summary;
  if (summary) text += `  summary ${summary}\n`;
  if (run.exit_reason !== null) text += `  exit    ${run.exit_reason}\n`;
  return text;
}
