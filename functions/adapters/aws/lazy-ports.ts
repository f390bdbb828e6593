/**
 * How the AWS parts build their ports: lazily, once. Apart from the composition root so that a
 * part imports no module that a function loads by `import()` (the composition is one): esbuild
 * wraps such a module in a lazy initializer, and an importer that calls that initializer at its
 * top level is no longer free of side effects, so the OpenAPI and `$default` bundles, which import
 * every route file for its definition, would keep every part and SDK client (docs/aws.md "Cold
 * starts").
 */

/** `build()`, called once, on first use. */
export function once<T>(build: () => T): () => T {
  let built: { value: T } | undefined;
  return () => {
    built ??= { value: build() };
    return built.value;
  };
}

/**
 * A port built on first use. A function is deployed with the settings and grants of the ports its
 * route uses only; building a port it was not deployed for fails at that use, naming the port and
 * the reason, instead of at the cold start of every function.
 *
 * A proxy rather than a getter on `Deps`, so that passing the port around, spreading or
 * destructuring `Deps`, or keying a WeakMap by the port (`loadComponent`) builds nothing. Methods
 * are bound to the built port, whose private fields a call through the proxy would not reach.
 */
export function lazy<T extends object>(port: string, build: () => T): T {
  const instance = once(() => {
    try {
      return build();
    } catch (error) {
      throw new Error(`${port} could not be built: ${(error as Error).message}`, { cause: error });
    }
  });
  return new Proxy({} as T, {
    get(_target, member) {
      const target = instance() as Record<PropertyKey, unknown>;
      const value = target[member];
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

export function required<T>(value: T | undefined, port: string, why: string): T {
  if (value === undefined) throw new Error(`${port} is not available: this function was deployed without ${why}`);
  return value;
}
