// The official TypeScript SDK as an MCP client of toold, for the Go tests
// in cmd/toold (mcp_test.go). It plays one session and prints what it saw
// as one JSON object on stdout; the Go test decides what is right.
//
//   node client.mjs http <url> [bearer key]
//   node client.mjs stdio <command> [args...]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [mode, target, ...rest] = process.argv.slice(2);

function transportFor() {
  if (mode === 'http') {
    const headers = rest[0] ? { Authorization: `Bearer ${rest[0]}` } : {};
    return new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
  }
  if (mode === 'stdio') {
    return new StdioClientTransport({ command: target, args: rest, stderr: 'inherit' });
  }
  throw new Error(`unknown mode ${mode}`);
}

// outcome runs a call and records its result or the error it threw.
async function outcome(fn) {
  try {
    return { result: await fn() };
  } catch (e) {
    return { error: { code: e.code, message: String(e.message ?? e) } };
  }
}

const client = new Client({ name: 'ts-interop', version: '1.0.0' });
const transport = transportFor();
await client.connect(transport);
const out = { server: client.getServerVersion(), protocol: transport.protocolVersion ?? null };

out.tools = (await client.listTools()).tools.map((t) => ({
  name: t.name, title: t.title, annotations: t.annotations, outputSchema: Boolean(t.outputSchema),
}));
out.success = await outcome(() => client.callTool({ name: 'echo', arguments: { message: 'hello from TypeScript' } }));
out.invalid = await outcome(() => client.callTool({ name: 'echo', arguments: { mesage: 'typo' } }));
out.unknown = await outcome(() => client.callTool({ name: 'no_such_tool', arguments: {} }));

const progress = [];
out.streamed = await outcome(() => client.callTool({ name: 'count', arguments: {} }, undefined,
  { onprogress: (p) => progress.push(p.message) }));
out.progress = progress;

const stop = new AbortController();
const started = Date.now();
setTimeout(() => stop.abort('the user pressed stop'), 300);
out.cancelled = await outcome(() => client.callTool({ name: 'sleep', arguments: { ms: 5000 } }, undefined,
  { signal: stop.signal }));
out.cancelled.after_ms = Date.now() - started;
// The cancellation notification is sent as the call is abandoned; give it
// a moment to reach toold before the session ends.
await new Promise((r) => setTimeout(r, 200));

await client.close();
console.log(JSON.stringify(out));
