// An agent loop over toold's REST API, as an OpenAI function-calling client
// runs it: list the tools in the provider's format, hand them to the model,
// execute each tool call the model makes, and return the envelope's data.
//
//   node examples/connect/rest_loop.mjs http://127.0.0.1:8080 read_file '{"paths":["README.md"]}'
//
// The model is left out (it needs a key and the internet): the call it would
// make is given on the command line. With the OpenAI SDK, pass `tools` to
// client.chat.completions.create and run `execute` for each tool_call.
const [base = "http://127.0.0.1:8080", name = "list_files", args = "{}"] = process.argv.slice(2);
const headers = { "Content-Type": "application/json" };
if (process.env.TOOLD_KEY) headers.Authorization = `Bearer ${process.env.TOOLD_KEY}`;

// tools: the "tools" array of the chat completions API, names the API accepts.
const tools = await (await fetch(`${base}/tools?format=openai`, { headers })).json();

// execute runs one tool call and returns what goes back to the model: the
// data on success, the error (with its suggestion) otherwise.
async function execute(call) {
  const res = await fetch(`${base}/tools/${encodeURIComponent(call.name)}/execute`, {
    method: "POST", headers, body: call.arguments,
  });
  const env = await res.json();
  return env.status === "success" ? env.data : { error: env.error };
}

const offered = tools.map((t) => t.function.name);
if (!offered.includes(name)) throw new Error(`${name} is not offered; tools: ${offered.join(", ")}`);
console.log(JSON.stringify({ offered, result: await execute({ name, arguments: args }) }));
