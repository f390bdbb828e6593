import type { Io } from "../../bin/cli/command.ts";

/** An `Io` for a command under test: what it writes to stdout and stderr is kept in `written`. */
export function recordingIo(env: Io["env"] = {}, home = "/nonexistent-home") {
  const written = { out: "", err: "" };
  const stream = (key: "out" | "err") =>
    ({
      write: (text: string) => {
        written[key] += text;
        return true;
      },
    }) as unknown as NodeJS.WritableStream;
  const io: Io = {
    out: stream("out"),
    err: stream("err"),
    stdin: process.stdin,
    env,
    home,
    signal: new AbortController().signal,
  };
  return { io, written };
}
