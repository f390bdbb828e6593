/** Components the scenarios deploy (inline code, no npm packages). */

/** Emits the request body on the default channel; the endpoint answers at once (no custom response). */
export const INGEST_CODE = `export default {
  name: "Bench ingest",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit(event.body);
  },
};
`;

/**
 * {@link INGEST_CODE} with a \`$.service.db\` counter (read and written every run), as registry sources
 * that keep state do: its runs go one at a time (docs/components.md, "One run at a time").
 */
export const INGEST_DB_CODE = `export default {
  name: "Bench ingest with db",
  version: "0.0.1",
  props: { http: "$.interface.http", db: "$.service.db" },
  async run(event) {
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    this.$emit(event.body);
  },
};
`;

/** Answers each request itself (custom response) with a small JSON body. */
export const RESPOND_CODE = `export default {
  name: "Bench respond",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    this.http.respond({ status: 200, headers: { "content-type": "application/json" }, body: { ok: true, n: event.body?.n ?? null } });
  },
};
`;

/** Inline code that differs per deploy (a comment), so every deploy and update bundles afresh. */
export const uniqueCode = (index: number) => `// bench deploy ${index} ${Math.random()}
export default {
  name: "Bench deploy",
  version: "0.0.1",
  props: { http: "$.interface.http", greeting: { type: "string", default: "hello" } },
  async run(event) {
    this.$emit({ greeting: this.greeting, body: event.body });
  },
};
`;

/**
 * Three code steps of a workflow, as a user writes them: the first reads the trigger's body, the
 * second exports from it, the third returns what the first two made.
 */
export const WORKFLOW_STEPS = [
  `export default defineComponent({
  async run({ steps }) {
    return { n: steps.trigger.event.body?.n ?? null };
  },
});
`,
  `export default defineComponent({
  async run({ steps, $ }) {
    $.export("doubled", (steps.parse.$return_value.n ?? 0) * 2);
  },
});
`,
  `export default defineComponent({
  async run({ steps }) {
    return { n: steps.parse.$return_value.n, doubled: steps.shape.doubled };
  },
});
`,
];

/** {@link WORKFLOW_STEPS} with the second step answering the request itself (`$.respond`). */
export const WORKFLOW_RESPOND_STEPS = [
  WORKFLOW_STEPS[0] as string,
  `export default defineComponent({
  async run({ steps, $ }) {
    $.export("doubled", (steps.parse.$return_value.n ?? 0) * 2);
    await $.respond({ status: 200, headers: { "content-type": "application/json" }, body: { ok: true, n: steps.parse.$return_value.n } });
  },
});
`,
  WORKFLOW_STEPS[2] as string,
];

/** The body of `POST /v1/workflows` for those steps, active, behind one HTTP trigger. */
export const workflowBody = (steps: readonly string[], customResponse: boolean) => ({
  settings: { name: "Bench workflow", auto_deploy: true },
  steps: steps.map((code, index) => ({ namespace: ["parse", "shape", "reply"][index], component_code: code })),
  triggers: [{ type: "http", props: { custom_response: customResponse } }],
});
