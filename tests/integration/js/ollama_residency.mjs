// ollama_residency.mjs: Ollama's keep_alive, ps and show through the official ollama client against a
// `sipp serve` whose model loads on demand (src/gateway/fleet/residency.c, api/ollama.c).
// Usage: node ollama_residency.mjs BASE MODEL
// Prints one JSON line with what it checked, and exits 1 with the reason on the first failure.
import { Ollama } from "ollama";

const [base, model] = process.argv.slice(2);
const WAIT_MS = 60000; // bound on waiting for the keep-alive deadline to pass
const POLL_MS = 100;
const KEEP_S = 1;
const ollama = new Ollama({ host: base });
const doneList = [];

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const listed = (ps) => ps.models.filter((m) => m.name === `${model}:latest`);

async function unloadedShow() {
  check(listed(await ollama.ps()).length === 0, "ps lists nothing before the first request");
  const show = await ollama.show({ model });
  check(show.details.format === "gguf" && show.model_info["general.architecture"] === "llama", "show");
  check(listed(await ollama.ps()).length === 0, "show does not load the model");
  doneList.push("show-unloaded");
}

async function loadAndUnload() {
  const loaded = await ollama.generate({ model, prompt: "" });
  check(loaded.done && loaded.done_reason === "load", `load: ${JSON.stringify(loaded)}`);
  const [m] = listed(await ollama.ps());
  check(m && m.size > 0 && m.size_vram === 0, `ps after load: ${JSON.stringify(m)}`);
  const unloaded = await ollama.generate({ model, prompt: "", keep_alive: 0 });
  check(unloaded.done && unloaded.done_reason === "unload", `unload: ${JSON.stringify(unloaded)}`);
  check(listed(await ollama.ps()).length === 0, "ps after keep_alive 0");
  doneList.push("load", "unload");
}

async function keepAliveDeadline() {
  const t0 = Date.now();
  const r = await ollama.chat({
    model, messages: [{ role: "user", content: "hi" }], keep_alive: `${KEEP_S}s`, options: { num_predict: 2 },
  });
  check(r.done, "chat");
  const [m] = listed(await ollama.ps());
  if (m) { // (on a slow machine it may already be gone)
    const left = new Date(m.expires_at).getTime() - Date.now();
    check(left <= KEEP_S * 1000 && left > -WAIT_MS, `expires_at ${m.expires_at} is within ${KEEP_S}s`);
  }
  while (listed(await ollama.ps()).length && Date.now() - t0 < WAIT_MS) await new Promise((ok) => setTimeout(ok, POLL_MS));
  check(listed(await ollama.ps()).length === 0, "unloaded after keep_alive");
  check(Date.now() - t0 >= KEEP_S * 1000, "not before its deadline");
  doneList.push("keep-alive-deadline");
}

async function forever() {
  await ollama.chat({ model, messages: [{ role: "user", content: "hi" }], keep_alive: -1, options: { num_predict: 2 } });
  const [m] = listed(await ollama.ps());
  check(m && new Date(m.expires_at).getFullYear() > 2300, `forever: ${JSON.stringify(m)}`);
  let err = null;
  try {
    await ollama.chat({ model, messages: [{ role: "user", content: "hi" }], keep_alive: "5 minutes" });
  } catch (e) {
    err = e;
  }
  check(err && err.status_code === 400 && /'keep_alive'/.test(err.error), `bad keep_alive: ${err}`);
  doneList.push("forever", "refused");
}

try {
  await unloadedShow();
  await loadAndUnload();
  await keepAliveDeadline();
  await forever();
  console.log(JSON.stringify({ ok: true, checked: doneList }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, checked: doneList, error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
}
