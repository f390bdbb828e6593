import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

/** A task of the stand-in API, as its JSON shows it. */
export interface StandInTask {
  id: number;
  title: string;
  completed: boolean;
  updated_at: string;
}

/** A feed item of the stand-in API (the fields RSS-to-JSON services give). */
export interface StandInItem {
  guid: string;
  title: string;
  link: string;
  pubdate: string;
}

/** A story of the stand-in API's search (the shape of a news search service's hits). */
export interface StandInStory {
  objectID: string;
  title: string;
  points: number;
}

/** One tenant's data: each deployed source polls its own, so tests never see each other's items. */
export interface Tenant {
  tasks: StandInTask[];
  feeds: Record<string, StandInItem[]>;
  stories: StandInStory[];
  /** When set, every request must carry `Authorization: Bearer <apiKey>`, else 401 (a connected account's key). */
  apiKey?: string;
}

/**
 * A small JSON API on 127.0.0.1 standing in for the third-party services registry sources poll,
 * so the polling sources of the suite run as they intend without an account. Under `/t/<tenant>`:
 *
 * - `GET /tasks?page=N&per_page=M` newest first, `{data, has_more}`; `GET /tasks/<id>`;
 *   `POST /tasks {title}`; `PATCH /tasks/<id> {completed?, title?}` (bumps `updated_at`);
 * - `GET /feeds/<name>.json` `{items}`;
 * - `GET /search?query=word` `{hits}` (stories whose title contains the word).
 *
 * Requests carry nothing secret unless a tenant has an `apiKey`; every one is recorded
 * (`requests`), so a test can tell a source polled. Anything else answers 404 with a JSON error,
 * as an API does.
 */
export interface StandInApi {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  /** `<origin>/t/<name>`, the base URL a component is configured with. */
  baseUrl(name: string): string;
  tenant(name: string): Tenant;
  addTasks(name: string, ...titles: string[]): StandInTask[];
  /** Changes a task as `PATCH /tasks/<id>` does. */
  updateTask(name: string, id: number, changes: Partial<Pick<StandInTask, "title" | "completed">>): StandInTask;
  readonly requests: string[];
  close(): Promise<void>;
}

export async function startStandInApi(): Promise<StandInApi> {
  const tenants = new Map<string, Tenant>();
  const requests: string[] = [];
  // Each change gets a later `updated_at` than any before it, and never one before the wall clock
  // (a source compares them with the time it was deployed at).
  let clock = 0;
  const tick = () => {
    clock = Math.max(clock + 1, Date.now());
    return new Date(clock).toISOString();
  };
  const tenant = (name: string) => {
    const found = tenants.get(name) ?? { tasks: [], feeds: {}, stories: [] };
    tenants.set(name, found);
    return found;
  };
  const addTasks = (name: string, ...titles: string[]) =>
    titles.map((title) => {
      const tasks = tenant(name).tasks;
      const task = { id: tasks.length + 1, title, completed: false, updated_at: tick() };
      tasks.push(task);
      return task;
    });

  const update = (task: StandInTask, changes: Record<string, unknown>) => {
    if (typeof changes.completed === "boolean") task.completed = changes.completed;
    if (typeof changes.title === "string") task.title = changes.title;
    task.updated_at = tick();
    return task;
  };

  const server = createServer(async (request, response) => {
    requests.push(`${request.method} ${request.url}`);
    const url = new URL(request.url ?? "/", "http://x");
    const answer = (status: number, body: unknown) => {
      response.writeHead(status, { "content-type": "application/json" });
      response.end(JSON.stringify(body));
    };
    const match = /^\/t\/([\w-]+)(\/.*)$/.exec(url.pathname);
    if (!match) return answer(404, { error: "not found" });
    const data = tenant(match[1] as string);
    if (data.apiKey !== undefined && request.headers.authorization !== `Bearer ${data.apiKey}`) {
      return answer(401, { error: "invalid API key" });
    }
    const path = match[2] as string;
    const taskId = /^\/tasks\/(\d+)$/.exec(path);
    const task = taskId ? data.tasks.find((t) => t.id === Number(taskId[1])) : undefined;
    if (request.method === "GET" && path === "/tasks") {
      const perPage = Number(url.searchParams.get("per_page") ?? 10);
      const page = Number(url.searchParams.get("page") ?? 1);
      const newest = [...data.tasks].reverse();
      return answer(200, {
        data: newest.slice((page - 1) * perPage, page * perPage),
        has_more: page * perPage < newest.length,
      });
    }
    if (request.method === "POST" && path === "/tasks") {
      const body = await jsonBody(request);
      if (typeof body.title !== "string") return answer(422, { error: "title is required" });
      return answer(201, addTasks(match[1] as string, body.title)[0]);
    }
    if (taskId && !task) return answer(404, { error: `no task ${taskId[1]}` });
    if (request.method === "GET" && task) return answer(200, task);
    if (request.method === "PATCH" && task) {
      const body = await jsonBody(request);
      return answer(200, update(task, body));
    }
    const feed = /^\/feeds\/([\w-]+)\.json$/.exec(path);
    if (request.method === "GET" && feed) {
      const items = data.feeds[feed[1] as string];
      return items ? answer(200, { items }) : answer(404, { error: "no such feed" });
    }
    if (request.method === "GET" && path === "/search") {
      const word = (url.searchParams.get("query") ?? "").toLowerCase();
      return answer(200, { hits: data.stories.filter((s) => s.title.toLowerCase().includes(word)) });
    }
    answer(404, { error: "not found" });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    baseUrl: (name) => `${origin}/t/${name}`,
    tenant,
    addTasks,
    updateTask: (name, id, changes) => {
      const task = tenant(name).tasks.find((t) => t.id === id);
      if (!task) throw new Error(`no task ${id} in ${name}`);
      return update(task, changes);
    },
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

async function jsonBody(request: IncomingMessage): Promise<Record<string, unknown>> {
  let text = "";
  for await (const chunk of request) text += chunk;
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
