// validate.mjs FILE...: validates every document of the YAML files against the Kubernetes API's JSON
// schemas (kubernetes-models, generated from the API's OpenAPI definitions; Gateway API kinds from
// @kubernetes-models/gateway-api). Prints one JSON line: {"ok", "checked": [[file, kind, name]],
// "unknown": [[file, apiVersion, kind]], "errors": [[file, kind, name, message]]}. A kind with no
// published schema (the inference extension's InferencePool) is listed as unknown, not passed.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const out = { ok: true, checked: [], unknown: [], errors: [] };

function modulePath(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : [null, apiVersion];
  if (group && group.startsWith("gateway.networking.")) return `@kubernetes-models/gateway-api/${group}/${version}/${kind}`;
  return group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
}

for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length) {
      out.errors.push([file, "?", "?", doc.errors.map(String).join("; ")]);
      continue;
    }
    const obj = doc.toJS();
    if (!obj) continue;
    const name = obj.metadata?.name ?? "?";
    let Model;
    try {
      Model = (await import(modulePath(obj.apiVersion, obj.kind)))[obj.kind];
    } catch {
      out.unknown.push([file, obj.apiVersion, obj.kind]);
      continue;
    }
    try {
      new Model(obj).validate();
      out.checked.push([file, obj.kind, name]);
    } catch (e) {
      out.errors.push([file, obj.kind, name, e.message]);
    }
  }
}
out.ok = out.errors.length === 0;
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);
