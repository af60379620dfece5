// A typed toold client, as a user would write one from the contract: the
// types come from openapi-typescript run on api/openapi.yaml (api/lint_test.go
// generates them into "toold-api" and compiles this file with tsc --strict).
// It does not run; it must compile, so the contract's operations, parameters
// and bodies are usable from a generated client.
import createClient from "openapi-fetch";
import type { components, operations, paths } from "toold-api";

type Envelope = components["schemas"]["Envelope"];
type Tool = components["schemas"]["Tool"];

// Every operation has an operationId, so generators can name its method.
type ExecuteTool = operations["executeTool"];
type ListTools = operations["listTools"];

type Listing = components["schemas"]["NativeListing"];

// GET /tools answers one of several renderings; the native one is the
// object whose tools carry a category.
function isNative(v: unknown): v is Listing {
  return typeof v === "object" && v !== null && "tools" in v && Array.isArray(v.tools) &&
    v.tools.every((t: unknown) => typeof t === "object" && t !== null && "category" in t);
}

export async function demo(baseUrl: string): Promise<Envelope | undefined> {
  const client = createClient<paths>({ baseUrl });
  const listed = await client.GET("/tools", { params: { query: { format: "native" } } });
  const tools: Tool[] = isNative(listed.data) ? listed.data.tools : [];
  const name: string = tools[0]?.function_name ?? tools[0]?.name ?? "echo";
  const run = await client.POST("/tools/{name}/execute", {
    params: { path: { name }, header: { "Toold-Timeout": "2s" } },
    body: { message: "hello" },
  });
  // The 200 is an Envelope, or a server-sent event stream when asked for.
  const env: Envelope | undefined = typeof run.data === "object" ? run.data : run.error;
  const ok: boolean | undefined = env?.success;
  void ok;
  const batch = await client.POST("/batch", {
    body: { calls: [{ id: "a", tool: name, arguments: { message: "x" } }] },
  });
  void batch;
  return env;
}

export type { ExecuteTool, ListTools };
