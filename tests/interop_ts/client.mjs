// Drives a Tether server with the official TypeScript MCP client (@modelcontextprotocol/client)
// and its Tasks extension (@modelcontextprotocol/ext-tasks), for tests/e2e/test_interop_typescript.py.
//
// Usage: node client.mjs URL SCENARIO [JSON-ARGS]
// Prints one JSON object on stdout: the scenario's observations plus `wire`, one entry per HTTP
// POST the client made (the routing headers it sent and the status it got back).
//
// Wiring, as the ext-tasks docs prescribe for a 2026-07-28 server ("Integrate adapters and
// schemas"): the SDK Client connects with `versionNegotiation` pinned to 2026-07-28, and
// `createTaskSessionFromClient` gets a `rawDispatch` plus `v2RequestFraming`, because the SDK's
// wire codec rejects `resultType: "task"`. The raw dispatcher here is the SDK's own
// StreamableHTTPClientTransport (a second instance that owns its request ids and matches the
// responses), so every header on the wire — MCP-Protocol-Version, Mcp-Method, Mcp-Name — is
// still derived by the official client code, not by this script.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  createApplicationInputHandler,
  createTaskSessionFromClient,
  taskViewFromExecutionEvent,
} from "@modelcontextprotocol/ext-tasks/client";

const PROTOCOL_VERSION = "2026-07-28";
const CLIENT_INFO = { name: "tether-interop-ts", version: "0.0.0" };
const CLIENT_CAPABILITIES = { elicitation: {} };
const REQUEST_TIMEOUT_MS = 10_000;

const [url, scenario, rawArgs] = process.argv.slice(2);
const args = rawArgs ? JSON.parse(rawArgs) : {};

const wire = [];
const errors = [];
const asked = [];

/** A fetch that records each MCP POST's routing headers and HTTP status. */
function recordingFetch(via) {
  return async (input, init = {}) => {
    const headers = new Headers(init.headers);
    let body;
    try {
      body = typeof init.body === "string" ? JSON.parse(init.body) : undefined;
    } catch {
      body = undefined;
    }
    const response = await fetch(input, init);
    wire.push({
      via,
      http: init.method ?? "GET",
      status: response.status,
      method: headers.get("mcp-method"),
      name: headers.get("mcp-name"),
      protocolVersion: headers.get("mcp-protocol-version"),
      bodyMethod: body?.method ?? null,
      bodyTaskId: body?.params?.taskId ?? null,
      declaresTasks: Boolean(
        body?.params?._meta?.["io.modelcontextprotocol/clientCapabilities"]?.extensions?.[
          "io.modelcontextprotocol/tasks"
        ],
      ),
    });
    return response;
  };
}

/** The host request coordinator ext-tasks asks for: owns ids, matches responses. */
class RawCoordinator {
  #transport;
  #pending = new Map();
  #next = 0;

  constructor(serverUrl) {
    this.#transport = new StreamableHTTPClientTransport(new URL(serverUrl), {
      fetch: recordingFetch("tasks"),
    });
    this.#transport.onmessage = (message) => {
      if (message === null || typeof message !== "object" || !("id" in message)) return;
      const waiter = this.#pending.get(message.id);
      if (waiter === undefined) return;
      this.#pending.delete(message.id);
      waiter.resolve(
        "error" in message
          ? { kind: "error", error: message.error }
          : { kind: "result", result: message.result },
      );
    };
    this.#transport.onerror = () => {};
  }

  start() {
    return this.#transport.start();
  }

  close() {
    return this.#transport.close();
  }

  dispatch = async (request, options = {}) => {
    const id = `tasks-${++this.#next}`;
    const timeoutMs = options.context?.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    let timer;
    const response = new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`${request.method} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      options.signal?.addEventListener(
        "abort",
        () => {
          this.#pending.delete(id);
          reject(options.signal.reason ?? new Error("aborted"));
        },
        { once: true },
      );
    });
    try {
      await this.#transport.send(
        { jsonrpc: "2.0", id, ...request },
        {
          ...(options.signal === undefined ? {} : { requestSignal: options.signal }),
          ...(options.context?.headers === undefined ? {} : { headers: options.context.headers }),
        },
      );
      return await response;
    } finally {
      clearTimeout(timer);
      this.#pending.delete(id);
      response.catch(() => {});
    }
  };
}

function outcomeJson(outcome) {
  if (outcome.status === "completed") return { status: "completed", result: outcome.result };
  if (outcome.status === "failed")
    return {
      status: "failed",
      error: { message: outcome.error.message, code: outcome.error.code ?? null },
    };
  return { status: outcome.status };
}

function viewJson(view) {
  return view === undefined
    ? null
    : {
        taskId: view.taskId,
        status: view.status,
        statusMessage: view.statusMessage ?? null,
        pollIntervalMs: view.suggestedPollIntervalMs ?? null,
        retentionMs: view.retentionMs,
      };
}

async function settle(execution) {
  const statuses = [];
  const { outcome, lastTask } = await execution.settle({
    onEvent(event) {
      const view = taskViewFromExecutionEvent(event);
      if (view !== undefined) statuses.push(view.status);
    },
  });
  return { statuses, outcome: outcomeJson(outcome), lastTask: viewJson(lastTask) };
}

const scenarios = {
  /** server/discover (at connect) and tools/list through the SDK Client. */
  async discover({ client, session }) {
    const { tools } = await client.listTools();
    const discovered = client.getDiscoverResult();
    return {
      era: client.getProtocolEra() ?? null,
      protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
      supportedVersions: discovered?.supportedVersions ?? null,
      serverCapabilities: client.getServerCapabilities() ?? null,
      serverVersion: client.getServerVersion() ?? null,
      sessionCapabilities: session.capabilities,
      tools: tools.map((tool) => tool.name),
    };
  },

  /** tools/call through the Tasks session: a task is polled (and its input answered) to the end. */
  async call({ session }) {
    const execution = await session.callTool(args.tool, args.arguments ?? {}, {
      task: { preference: args.preference ?? "allow" },
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
    });
    return {
      kind: execution.kind,
      taskId: execution.handle?.taskId ?? null,
      ...(await settle(execution)),
    };
  },

  /** A task cancelled with the client; the server's own view is then polled to the end. */
  async cancel({ session }) {
    const execution = await session.callTool(args.tool, args.arguments ?? {}, {
      task: { preference: "require" },
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
    });
    const taskId = execution.handle.taskId;
    const controller = session.task(taskId, { requestTimeoutMs: REQUEST_TIMEOUT_MS });
    const before = await controller.snapshot();
    await execution.cancel();
    const local = await execution.result();
    const remote = await controller.result();
    const after = await controller.snapshot();
    return {
      kind: execution.kind,
      taskId,
      before: viewJson(before),
      localOutcome: outcomeJson(local),
      remoteOutcome: outcomeJson(remote),
      after: viewJson(after),
    };
  },

  /** A plain synchronous tool: the SDK Client's own callTool, and the Tasks session's. */
  async sync({ client, session }) {
    const plain = await client.callTool({ name: args.tool, arguments: args.arguments ?? {} });
    const execution = await session.callTool(args.tool, args.arguments ?? {});
    return {
      plain,
      kind: execution.kind,
      ...(await settle(execution)),
    };
  },
};

async function main() {
  if (!url || !(scenario in scenarios)) {
    throw new Error(`usage: client.mjs URL (${Object.keys(scenarios).join("|")}) [JSON-ARGS]`);
  }
  const client = new Client(CLIENT_INFO, {
    capabilities: CLIENT_CAPABILITIES,
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch("client") }),
  );
  const raw = new RawCoordinator(url);
  await raw.start();
  const session = createTaskSessionFromClient(client, {
    endpointId: url,
    rawDispatch: raw.dispatch,
    v2RequestFraming: {
      protocolVersion: client.getNegotiatedProtocolVersion() ?? PROTOCOL_VERSION,
      clientInfo: CLIENT_INFO,
      clientCapabilities: CLIENT_CAPABILITIES,
    },
    onInputRequest: createApplicationInputHandler({
      elicitation: async (request, context) => {
        asked.push({
          kind: request.kind,
          scope: context.scope,
          delivery: context.delivery,
          taskId: context.taskId ?? null,
          inputId: context.inputId ?? null,
          message: request.params.message ?? null,
          requestedSchema: request.params.requestedSchema ?? null,
        });
        return args.answer ?? { action: "decline" };
      },
      sampling: async () => {
        throw new Error("this client offers no sampling");
      },
      roots: async () => ({ roots: [] }),
    }),
    onError: (error) => errors.push(String(error?.stack ?? error)),
  });
  try {
    const observed = await scenarios[scenario]({ client, session });
    return { scenario, ...observed, asked, errors, wire };
  } finally {
    await session.close().catch(() => {});
    await raw.close().catch(() => {});
    await client.close().catch(() => {});
  }
}

try {
  const out = await main();
  process.stdout.write(`${JSON.stringify(out)}\n`);
} catch (error) {
  process.stdout.write(
    `${JSON.stringify({
      scenario,
      exception: {
        name: error?.name ?? null,
        message: String(error?.message ?? error),
        code: error?.code ?? null,
        data: error?.data ?? null,
        stack: String(error?.stack ?? ""),
      },
      asked,
      errors,
      wire,
    })}\n`,
  );
  process.exitCode = 1;
}
