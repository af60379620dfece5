// The official TypeScript SDK as a client of one of toold's toolsets
// (/mcp/<toolset>), for cmd/toold/search_test.go: it lists the tools, calls
// each tool named on the command line, and searches with search_tools,
// then prints what it saw as one JSON object.
//
//   node toolset.mjs <url> <query> <tool> [tool...]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, query, ...calls] = process.argv.slice(2);

async function outcome(fn) {
  try {
    const r = await fn();
    return { isError: Boolean(r.isError), structured: r.structuredContent ?? null };
  } catch (e) {
    return { error: { code: e.code, message: String(e.message ?? e) } };
  }
}

const client = new Client({ name: 'ts-toolset', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const out = { tools: (await client.listTools()).tools.map((t) => t.name), calls: {} };
for (const name of calls) {
  out.calls[name] = await outcome(() => client.callTool({ name, arguments: {} }));
}
out.search = await outcome(() => client.callTool({ name: 'search_tools', arguments: { query, limit: 10 } }));
await client.close();
process.stdout.write(JSON.stringify(out));
