// The official TypeScript SDK calling a toold tool as an MCP task
// (2025-11-25), for the Go tests in cmd/toold (tasks_test.go). It prints
// one JSON line per thing it sees — the task created, each status it
// polls, each question toold asks it, the result — so the test can act in
// between (a person approving in the console, answering a question) and
// judge the end.
//
//   TOOL=name ARGS='{...}' [KEY=bearer] [ELICIT='{"answer":...}'] node tasks.mjs http <url>
//   TOOL=name ARGS='{...}' [ELICIT=...] node tasks.mjs stdio <command> [args...]
//
// With ELICIT the client declares elicitation and answers every question
// with that content; without it, it declares none, and the question is
// answered elsewhere (the console's route) while tasks/result waits.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [mode, target, ...rest] = process.argv.slice(2);
const env = process.env;
const say = (event, fields) => console.log(JSON.stringify({ event, ...fields }));

function transportFor() {
  if (mode === 'http') {
    const headers = env.KEY ? { Authorization: `Bearer ${env.KEY}` } : {};
    return new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
  }
  if (mode === 'stdio') {
    return new StdioClientTransport({ command: target, args: rest, stderr: 'inherit' });
  }
  throw new Error(`unknown mode ${mode}`);
}

const capabilities = { tasks: { list: {}, cancel: {} } };
if (env.ELICIT) capabilities.elicitation = { form: {} };
const client = new Client({ name: 'ts-tasks', version: '1.0.0' }, { capabilities });
if (env.ELICIT) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    say('elicited', { message: req.params.message, meta: req.params._meta ?? null });
    return { action: 'accept', content: JSON.parse(env.ELICIT) };
  });
}
await client.connect(transportFor());
say('connected', { tasks: client.getServerCapabilities()?.tasks ?? null });

const tool = (await client.listTools()).tools.find((t) => t.name === env.TOOL);
say('listed', { name: tool?.name ?? null, taskSupport: tool?.execution?.taskSupport ?? null });

let taskId = null;
const stream = client.experimental.tasks.callToolStream(
  { name: env.TOOL, arguments: JSON.parse(env.ARGS || '{}') }, CallToolResultSchema, { task: { ttl: 600000 } });
for await (const m of stream) {
  switch (m.type) {
    case 'taskCreated':
      taskId = m.task.taskId;
      say('taskCreated', { taskId, status: m.task.status });
      break;
    case 'taskStatus':
      say('taskStatus', { taskId: m.task.taskId, status: m.task.status, statusMessage: m.task.statusMessage ?? '' });
      break;
    case 'result':
      say('result', { result: m.result });
      break;
    case 'error':
      say('error', { code: m.error.code ?? null, message: String(m.error.message ?? m.error) });
      break;
  }
}
if (taskId) {
  const listed = await client.experimental.tasks.listTasks();
  say('listed-tasks', { taskIds: listed.tasks.map((t) => t.taskId) });
  const got = await client.experimental.tasks.getTask(taskId);
  say('final', { status: got.status });
}
await client.close();
