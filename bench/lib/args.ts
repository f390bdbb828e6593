/** Command-line flags of `npm run bench` (pure, so the unit tests can check them). */
export interface BenchArgs {
  /** Scenario names to run; empty means all. */
  only: string[];
  /** Short durations and small counts: a smoke test, not comparable with full runs. */
  quick: boolean;
  /** Profile the server of each scenario with `--cpu-prof`. */
  profile: boolean;
  /** Where results go (default bench/results). */
  out: string | undefined;
  help: boolean;
}

export const USAGE = `Usage: npm run bench -- [--only <name,...>] [--quick] [--profile] [--out <dir>]

  --only <names>  run only these scenarios (comma-separated, or repeat the flag)
  --quick         short durations and small counts (smoke test; figures not comparable)
  --profile       CPU-profile the server of each scenario; prints its top self-time functions
  --out <dir>     write latest.md, latest.json and dated copies here (default bench/results)
`;

export function parseArgs(argv: readonly string[], known: readonly string[]): BenchArgs {
  const args: BenchArgs = { only: [], quick: false, profile: false, out: undefined, help: false };
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index] as string;
    const [flag, inline] = arg.startsWith("--") && arg.includes("=") ? arg.split(/=(.*)/s, 2) : [arg, undefined];
    const value = () => {
      const next = inline ?? argv[++index];
      if (next === undefined || next.startsWith("--")) throw new Error(`${flag} needs a value`);
      return next;
    };
    if (flag === "--quick") args.quick = true;
    else if (flag === "--profile") args.profile = true;
    else if (flag === "--help" || flag === "-h") args.help = true;
    else if (flag === "--out") args.out = value();
    else if (flag === "--only") {
      for (const name of value().split(",")) {
        const trimmed = name.trim();
        if (!trimmed) continue;
        if (!known.includes(trimmed)) throw new Error(`unknown scenario "${trimmed}"; known: ${known.join(", ")}`);
        if (!args.only.includes(trimmed)) args.only.push(trimmed);
      }
    } else throw new Error(`unknown argument "${arg}"\n\n${USAGE}`);
  }
  return args;
}
