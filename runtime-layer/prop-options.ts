/**
 * Runs a prop's `options` for the configure endpoint (docs/components.md "Dynamic props"), inside
 * the sandbox, with `this` built as for `run`. The answer is what `options` returned, as JSON and
 * unchecked: trusted code (`functions/core/prop-options.ts`) validates it as hostile input.
 *
 * Where the prop comes from, as the original resolves it (component-model.md "User input prop
 * properties"):
 * - the component's own `props`, else the props its `additionalProps` returns;
 * - `propDefinition: [app, name, inputValues?]` without an `options` of its own: the app's
 *   `propDefinitions[name].options`, called with `this` the app prop as the component sees it
 *   (`$auth` and the app's methods), and with the values `inputValues` gives (an object, or a
 *   function of the configured props: `(c) => ({ repo: c.repo })`) merged into its argument.
 */
import { toJson } from "./describe-component.ts";
import type { Json } from "./protocol.ts";

type Bag = Record<string, unknown>;

const isBag = (value: unknown): value is Bag => typeof value === "object" && value !== null && !Array.isArray(value);

/** What the caller (`run-invocation.ts`) provides: the configured props and how an app is bound. */
export interface PropOptionsScope {
  /** The invocation's configured prop values (a data store prop as its methods), handed to an `inputValues` function. */
  readonly props: Record<string, unknown>;
  /** `this.<appProp>` of an app no prop of the component configures (an empty `$auth`). */
  bindApp(app: Bag): unknown;
}

/** What the configure endpoint asks for, in `Invocation.event` of a `propOptions` invocation. */
export interface PropOptionsRequest {
  prop: string;
  /** 0-indexed page. */
  page: number;
  /** The `context` the previous page returned; `{}` on the first. */
  prevContext: Json;
  /** The user's search text, for a prop with `useQuery`. */
  query?: string;
  /** What `additionalProps(previousPropDefs)` receives when the prop is a dynamic one. */
  previousPropDefs?: Json;
}

/** Runs the options of the prop `event` names; throws what the code threw, or a TypeError. */
export async function runPropOptions(
  component: Bag,
  self: Bag,
  event: unknown,
  scope: PropOptionsScope,
): Promise<Json> {
  const request = isBag(event) ? event : {};
  const name = request.prop;
  if (typeof name !== "string") throw new TypeError("the options request names no prop");
  const declared = await findProp(component, self, name, request.previousPropDefs ?? {});
  if (declared === undefined) throw new TypeError(`"${name}" is not a prop of this component`);
  // A bare-string prop (`"string"`, `"$.interface.http"`) has no options.
  if (!isBag(declared)) throw new TypeError(`the prop "${name}" has no options`);

  let options = declared.options;
  let target: unknown = self;
  let inputValues: unknown = {};
  const reference = declared.propDefinition;
  if (!("options" in declared) && Array.isArray(reference)) {
    const [app, definitionName, input] = reference as unknown[];
    const definitions = isBag(app) ? app.propDefinitions : undefined;
    const definition =
      isBag(definitions) && typeof definitionName === "string" ? definitions[definitionName] : undefined;
    if (isBag(definition)) {
      options = definition.options;
      target = boundApp(component, self, app as Bag, scope);
      // The real registry pattern: `propDefinition: [github, "branch", (c) => ({ repo: c.repo })]`.
      inputValues = typeof input === "function" ? await input({ ...scope.props }) : input;
    }
  }
  if (Array.isArray(options)) return toJson(options) ?? null;
  if (typeof options !== "function") throw new TypeError(`the prop "${name}" has no options`);
  const argument: Bag = {
    ...(isBag(inputValues) ? inputValues : {}),
    page: request.page,
    prevContext: request.prevContext ?? {},
  };
  if (typeof request.query === "string") argument.query = request.query;
  const returned: unknown = await options.call(target, argument);
  return toJson(returned) ?? null;
}

async function findProp(component: Bag, self: Bag, name: string, previousPropDefs: unknown): Promise<unknown> {
  const props = isBag(component.props) ? component.props : {};
  if (Object.hasOwn(props, name)) return props[name];
  if (typeof component.additionalProps !== "function") return undefined;
  const dynamic: unknown = await component.additionalProps.call(self, previousPropDefs);
  return isBag(dynamic) && Object.hasOwn(dynamic, name) ? dynamic[name] : undefined;
}

/**
 * `this` of an app's propDefinition `options`: the component's prop of that app when it declares
 * one (the same object, else the same app slug), with its configured `$auth`; else the app bound
 * with an empty `$auth`.
 */
function boundApp(component: Bag, self: Bag, app: Bag, scope: PropOptionsScope): unknown {
  const props = isBag(component.props) ? component.props : {};
  const entries = Object.entries(props);
  const same =
    entries.find(([, declared]) => declared === app) ??
    entries.find(([, declared]) => isBag(declared) && declared.type === "app" && declared.app === app.app);
  if (same && isBag(self[same[0]])) return self[same[0]];
  return scope.bindApp(app);
}
