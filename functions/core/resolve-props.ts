/**
 * A component's configured props validated as a deploy does, for a source (`sources.ts`) and a
 * workflow step (`workflows.ts`) alike: against the static props; or, when the component has
 * `additionalProps`, first the static props given (their accounts checked before any code sees
 * them), then `additionalProps` asked on those values (`askAdditionalProps`: the caller's probe),
 * then every prop given against the final set it makes.
 */
import { requireAccounts } from "./app-accounts.ts";
import type { ComponentRecord, PropDescription } from "./component-model.ts";
import type { Deps } from "./ports/deps.ts";
import { type ValidatedProps, validateConfiguredProps } from "./props.ts";

export interface ResolvePropsOptions {
  /** Where the props are in the request: `configured_props`, `steps[i].props`. */
  fieldPrefix: string;
  /** A step's props may hold `{{ ... }}` expressions (`validateConfiguredProps`). */
  expressions?: boolean;
  /** The input to validate against `defs` (an update lays the given values over those kept). */
  over?: (defs: PropDescription[], given: Record<string, unknown> | undefined) => Record<string, unknown> | undefined;
  /** The final prop set: `additionalProps` asked on the static values validated. */
  askAdditionalProps(staticValues: ValidatedProps): Promise<PropDescription[]>;
}

export async function resolveComponentProps(
  deps: Pick<Deps, "appAccounts">,
  workspaceId: string,
  component: ComponentRecord,
  input: Record<string, unknown> | undefined,
  options: ResolvePropsOptions,
): Promise<{ validated: ValidatedProps; definitions?: PropDescription[] }> {
  const { fieldPrefix } = options;
  const over = options.over ?? ((_defs, given) => given);
  const validate = (defs: PropDescription[], given: Record<string, unknown> | undefined) =>
    validateConfiguredProps(defs, over(defs, given), fieldPrefix, { expressions: options.expressions === true });
  const staticDefs = component.metadata.props;
  if (!component.metadata.hasAdditionalProps) {
    const validated = validate(staticDefs, input);
    await requireAccounts(deps, workspaceId, staticDefs, validated.values, fieldPrefix);
    return { validated };
  }
  const staticNames = new Set(staticDefs.map((prop) => prop.name));
  const staticInput = Object.fromEntries(Object.entries(input ?? {}).filter(([name]) => staticNames.has(name)));
  const first = validate(staticDefs, staticInput);
  // Before additionalProps runs with them: a foreign account must never reach the code.
  await requireAccounts(deps, workspaceId, staticDefs, first.values, fieldPrefix);
  const definitions = await options.askAdditionalProps(first);
  const validated = validate(definitions, input);
  await requireAccounts(deps, workspaceId, definitions, validated.values, fieldPrefix);
  return { validated, definitions };
}
