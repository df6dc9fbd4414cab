#!/usr/bin/env node
// Streams a chat answer from a local GGUF model to stdout, with sipp's Node.js binding.
//
//   SIPP_NODE_BACKEND=cpu node examples/node/chat.mjs models/sipp-demo.gguf "Hello!"
//
// SIPP_NODE_BACKEND (auto, cpu, vulkan, cuda, metal) picks the backend; the speed and the backend
// that ran it are printed on stderr at the end. Ctrl-C stops the answer. Build the addon first with
// bash bindings/node/build.sh.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const [, script, model, prompt] = process.argv;
if (!model || !prompt) {
  console.error(`usage: node ${script} MODEL.gguf PROMPT`);
  process.exit(2);
}

let client;
try {
  // the package lives in bindings/node of this repository; an installed one works the same
  const { SippClient } = require('../../bindings/node');
  client = new SippClient();
  const ep = await client.add('local', { kind: 'local', model, options: { ctxSize: 2048, parallel: 1 } });
  const ac = new AbortController();
  process.once('SIGINT', () => ac.abort());
  const q = client.chat([{ role: 'user', content: prompt }], { endpoint: ep, maxTokens: 256, signal: ac.signal });
  for await (const piece of q.tokens) process.stdout.write(piece);
  const r = await q.response;
  process.stdout.write('\n');
  console.error(`-- ${ep.backend.backend} (${ep.backend.reason}) | ${r.usage.promptTokens} prompt tokens, ` +
    `${r.usage.completionTokens} generated, ${r.stats.decodeTokensPerS.toFixed(1)} tokens/s, ` +
    `ttft ${r.stats.ttftMs.toFixed(0)} ms | finish ${r.finishReason}`);
} catch (e) {
  console.error(`sipp: ${e.message}`);
  process.exitCode = 1;
} finally {
  if (client) await client.close();
}
