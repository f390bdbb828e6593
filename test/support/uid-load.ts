import { randomUUID } from "node:crypto";

/**
 * Load for the fault tests: `concurrency` workers POST `{uid}` bodies (a fresh UUID each) to
 * `endpoint` until `stop()`, or until the server is killed under them; `accepted` holds the uids
 * answered 2xx, which the test then follows to the history, the runs or a receiver.
 */
export function postUids(endpoint: string, concurrency: number) {
  const accepted: string[] = [];
  let running = true;
  const worker = async () => {
    while (running) {
      const uid = randomUUID();
      try {
        const answer = await fetch(endpoint, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ uid }),
        });
        await answer.arrayBuffer();
        if (answer.status >= 200 && answer.status < 300) accepted.push(uid);
      } catch {
        // The server was killed: this request was never answered.
        return;
      }
    }
  };
  const workers = Promise.all(Array.from({ length: concurrency }, worker));
  return {
    accepted,
    stop: async () => {
      running = false;
      await workers;
    },
  };
}
