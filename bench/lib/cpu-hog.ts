/**
 * Keeps one core busy, as another program on the machine would: spins in slices of 50 ms, letting
 * its event loop turn between slices so it sees its stdin close (the bench ended) and exits. Run as
 * its own process by `startCpuHog` (processes.ts); prints `spinning` once it has started.
 */
const SLICE_MS = 50;

function spin(): void {
  const until = performance.now() + SLICE_MS;
  while (performance.now() < until) {
    // busy on purpose
  }
  setImmediate(spin);
}

process.stdout.write("spinning\n");
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
spin();
