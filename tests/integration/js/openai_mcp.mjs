// openai_mcp.mjs: the Responses API's mcp tools through the official openai npm client, against a
// gateway with an [[mcp]] server "calc" (tests/fixtures/mcp/server.js). Usage:
//   node openai_mcp.mjs BASE_URL MODEL TOKEN
// The model is a random-weight one forced to call add: the checks are the server's real answer to
// whatever arguments the grammar let it write. Prints one JSON line with what it checked, and exits
// 1 with the reason on the first failure.
import OpenAI from "openai";

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, timeout: 120000, maxRetries: 0 });
const done = [];

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

function body(approval, extra = {}) {
  return {
    model, input: "Use the add tool.", max_output_tokens: 60, temperature: 0,
    tools: [{ type: "mcp", server_label: "calc", allowed_tools: ["add"], require_approval: approval }],
    tool_choice: { type: "mcp", server_label: "calc", name: "add" }, ...extra,
  };
}

function checkSum(call) {
  const args = JSON.parse(call.arguments);
  check(call.type === "mcp_call" && call.server_label === "calc" && call.name === "add", "an mcp_call of add");
  check(call.output === String(args.a + args.b), `add's output ${call.output} for ${call.arguments}`);
}

async function plain() {
  const r = await client.responses.create(body("never"));
  check(r.output[0].type === "mcp_list_tools", `first item ${r.output[0].type}`);
  check(r.output[0].tools.map((t) => t.name).join() === "add", "the listed tools");
  checkSum(r.output.find((o) => o.type === "mcp_call"));
  done.push("mcp_call");
}

async function streamed() {
  const stream = await client.responses.create(body("never", { stream: true }));
  const types = [];
  let final = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "response.completed" || ev.type === "response.incomplete") final = ev.response;
  }
  for (const t of ["response.mcp_list_tools.completed", "response.mcp_call_arguments.done", "response.mcp_call.completed"])
    check(types.includes(t), `event ${t}`);
  checkSum(final.output.find((o) => o.type === "mcp_call"));
  done.push("mcp_call-stream");
}

async function approval() {
  const r = await client.responses.create(body("always"));
  const req = r.output.find((o) => o.type === "mcp_approval_request");
  check(req && req.id.startsWith("mcpr_"), "an approval request");
  const r2 = await client.responses.create(body("always", {
    previous_response_id: r.id, tool_choice: "none", max_output_tokens: 8,
    input: [{ type: "mcp_approval_response", approval_request_id: req.id, approve: true }],
  }));
  const call = r2.output.find((o) => o.type === "mcp_call");
  check(call && call.approval_request_id === req.id, "the approved call");
  checkSum(call);
  done.push("approval");
}

try {
  await plain();
  await streamed();
  await approval();
  console.log(JSON.stringify({ ok: true, checked: done }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, checked: done, error: String(e?.stack ?? e) }));
  process.exit(1);
}
