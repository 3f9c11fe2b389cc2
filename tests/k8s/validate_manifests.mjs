// tests/k8s/validate_manifests.mjs: validates Kubernetes manifests against the API schemas of the
// built-in kinds (kubernetes-models from npm, docs/DEPENDENCIES.md), document by document. Kinds
// of other API groups (KServe, LeaderWorkerSet: custom resources) are listed as not validated.
//   node tests/k8s/validate_manifests.mjs FILE...                   exit 0 when every object is valid
//   node tests/k8s/validate_manifests.mjs --expect-invalid FILE...  exit 0 when every file has an invalid object
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { parseAllDocuments } from "yaml";

const require = createRequire(import.meta.url);
const args = process.argv.slice(2);
const expectInvalid = args[0] === "--expect-invalid";
const files = expectInvalid ? args.slice(1) : args;
if (files.length === 0) {
  console.error("usage: validate_manifests.mjs [--expect-invalid] FILE...");
  process.exit(2);
}

// The model class of apiVersion/kind, or null for a kind kubernetes-models does not define.
function modelOf(apiVersion, kind) {
  try {
    return require(`kubernetes-models/${apiVersion}/${kind}`)[kind] ?? null;
  } catch {
    return null;
  }
}

let failed = false;
for (const file of files) {
  let invalid = 0;
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length > 0) {
      console.log(`${file}: not YAML: ${doc.errors[0].message}`);
      invalid++;
      continue;
    }
    const object = doc.toJS();
    if (object === null || object === undefined) continue;
    const where = `${file}: ${object.kind}/${object.metadata?.name}`;
    const Model = modelOf(object.apiVersion, object.kind);
    if (Model === null) {
      console.log(`${where}: not validated (${object.apiVersion} is not a built-in API)`);
      continue;
    }
    try {
      new Model(object).validate();
      console.log(`${where}: valid ${object.apiVersion}`);
    } catch (error) {
      invalid++;
      const details = (error.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
      console.log(`${where}: INVALID: ${details || error.message}`);
    }
  }
  if (expectInvalid ? invalid === 0 : invalid > 0) failed = true;
}
process.exit(failed ? 1 : 0);
