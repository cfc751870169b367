// Validates a kustomize folder of htam's Kubernetes manifests (tools/packaging/k8s/base): builds
// the objects it declares (resources, namespace, secretGenerator / configMapGenerator from files),
// checks every object against the Kubernetes API's OpenAPI schema (kubernetes-models: types,
// required fields, enums, formats; unknown fields are not reported by these schemas), then checks
// that the pieces fit together (selectors and labels, the Service the workers dial, the Secrets
// and keys each pod mounts). Where kubectl is installed, `kubectl kustomize` must build the same
// objects. Usage: node validate.mjs FOLDER   (exit 0: valid; 1: the errors are printed)
import { execFileSync } from "node:child_process";
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, parse } from "yaml";

const dir = process.argv[2];
const errors = [];
const fail = (msg) => errors.push(msg);
const CLUSTER_SCOPED = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume",
                                "StorageClass", "CustomResourceDefinition", "PriorityClass"]);

function build(folder) {
  const k = parse(readFileSync(join(folder, "kustomization.yaml"), "utf8"));
  if (k.kind !== "Kustomization") fail("kustomization.yaml: kind is not Kustomization");
  const objects = [];
  for (const r of k.resources ?? []) {
    const path = join(folder, r);
    if (!existsSync(path)) { fail(`kustomization.yaml: resource ${r} does not exist`); continue; }
    for (const doc of parseAllDocuments(readFileSync(path, "utf8"))) {
      if (doc.errors.length) { fail(`${r}: ${doc.errors[0].message}`); continue; }
      const o = doc.toJS();
      if (o) objects.push({ file: r, o });
    }
  }
  const gen = (list, kind) => {
    for (const g of list ?? []) {
      const data = {};
      for (const f of g.files ?? []) {
        const [key, path] = f.includes("=") ? f.split("=", 2) : [f.split("/").pop(), f];
        const full = join(folder, path);
        if (!existsSync(full)) { fail(`kustomization.yaml: ${kind} ${g.name}: file ${path} does not exist`); continue; }
        const bytes = readFileSync(full);
        data[key] = kind === "Secret" ? bytes.toString("base64") : bytes.toString("utf8");
      }
      const o = { apiVersion: "v1", kind, metadata: { name: g.name }, data };
      if (kind === "Secret") o.type = g.type ?? "Opaque";
      objects.push({ file: "kustomization.yaml", o });
    }
  };
  gen(k.secretGenerator, "Secret");
  gen(k.configMapGenerator, "ConfigMap");
  if (k.generatorOptions?.disableNameSuffixHash !== true)
    fail("kustomization.yaml: generatorOptions.disableNameSuffixHash must be true (the pods name the Secrets as they are)");
  for (const { o } of objects) {
    o.metadata = o.metadata ?? {};
    if (k.namespace && !CLUSTER_SCOPED.has(o.kind)) o.metadata.namespace = k.namespace;
  }
  return objects;
}

async function validateSchema({ file, o }) {
  const where = `${file}: ${o.kind}/${o.metadata?.name}`;
  if (!o.apiVersion || !o.kind) return fail(`${where}: no apiVersion or kind`);
  let mod;
  try {
    mod = await import(`kubernetes-models/${o.apiVersion}/${o.kind}`);
  } catch {
    return fail(`${where}: ${o.apiVersion} ${o.kind} is not a Kubernetes API type`);
  }
  try {
    new mod[o.kind](o).validate();
  } catch (e) {
    fail(`${where}: ${e.message}`);
  }
}

const subset = (a = {}, b = {}) => Object.entries(a).every(([k, v]) => b[k] === v);

function checkTogether(objects) {
  const of = (kind) => objects.map((x) => x.o).filter((o) => o.kind === kind);
  const workloads = [...of("StatefulSet"), ...of("DaemonSet"), ...of("Deployment")];
  const secrets = new Map(of("Secret").map((s) => [s.metadata.name, s]));
  const services = of("Service");
  for (const w of workloads) {
    const name = `${w.kind}/${w.metadata.name}`;
    const labels = w.spec.template?.metadata?.labels;
    if (!subset(w.spec.selector?.matchLabels, labels))
      fail(`${name}: selector ${JSON.stringify(w.spec.selector?.matchLabels)} does not match its pod labels`);
    if (w.kind === "StatefulSet" && !services.some((s) => s.metadata.name === w.spec.serviceName))
      fail(`${name}: serviceName ${w.spec.serviceName} names no Service`);
    const pod = w.spec.template.spec;
    const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
    for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
      for (const m of c.volumeMounts ?? []) {
        const claim = (w.spec.volumeClaimTemplates ?? []).some((t) => t.metadata.name === m.name);
        if (!volumes.has(m.name) && !claim) fail(`${name}: container ${c.name} mounts ${m.name}, which is no volume`);
      }
    }
    for (const v of volumes.values())
      if (v.secret && !secrets.has(v.secret.secretName))
        fail(`${name}: volume ${v.name} names Secret ${v.secret.secretName}, which nothing declares`);
    // The key files a container names on its command line are keys of a Secret mounted there.
    for (const c of pod.containers) {
      for (const arg of [...(c.args ?? []), ...(c.command ?? [])]) {
        for (const m of c.volumeMounts ?? []) {
          if (!arg.startsWith(m.mountPath + "/")) continue;
          const v = volumes.get(m.name);
          const key = arg.slice(m.mountPath.length + 1);
          if (v?.secret && !(key in (secrets.get(v.secret.secretName)?.data ?? {})))
            fail(`${name}: ${arg} is not a key of Secret ${v.secret.secretName}`);
        }
      }
      // --worker.connect tcp://SERVICE.NAMESPACE.svc:PORT must be a port of that Service.
      const i = (c.args ?? []).indexOf("--worker.connect");
      if (i >= 0) {
        const m = /^tcp:\/\/([^.:]+)\.([^.:]+)\.svc(?:\.cluster\.local)?:(\d+)$/.exec(c.args[i + 1] ?? "");
        const svc = m && services.find((s) => s.metadata.name === m[1] && s.metadata.namespace === m[2]);
        if (!svc || !svc.spec.ports.some((p) => p.port === Number(m[3])))
          fail(`${name}: --worker.connect ${c.args[i + 1]} is no port of a Service here`);
      }
    }
  }
  for (const s of services) {
    if (!workloads.some((w) => subset(s.spec.selector, w.spec.template?.metadata?.labels)))
      fail(`Service/${s.metadata.name}: its selector matches no pod template`);
  }
  // htamd's image (tools/packaging/docker/htamd.Dockerfile) reads these keys.
  const htamdKeys = secrets.get("htamd-keys")?.data ?? {};
  for (const k of ["server.key", "clients", "workers"])
    if (!(k in htamdKeys)) fail(`Secret/htamd-keys: no key ${k} (htamd's image reads /etc/htam/keys/${k})`);
}

function compareKubectl(objects) {
  let out;
  try {
    out = execFileSync("kubectl", ["kustomize", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    if (e.code === "ENOENT") { console.log("kubectl not installed: not compared with kubectl kustomize"); return; }
    return fail(`kubectl kustomize ${dir}: ${e.stderr || e.message}`);
  }
  const id = (o) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
  const theirs = parseAllDocuments(out).map((d) => id(d.toJS())).sort();
  const ours = objects.map((x) => id(x.o)).sort();
  if (JSON.stringify(theirs) !== JSON.stringify(ours))
    fail(`kubectl kustomize builds ${theirs.join(", ")}; expected ${ours.join(", ")}`);
  else console.log(`kubectl kustomize builds the same ${theirs.length} objects`);
}

const objects = build(dir);
for (const x of objects) await validateSchema(x);
if (!errors.length) checkTogether(objects);
if (!errors.length) compareKubectl(objects);
if (errors.length) {
  for (const e of errors) console.log("invalid: " + e);
  process.exit(1);
}
console.log(`valid: ${objects.length} objects (${objects.map((x) => x.o.kind + "/" + x.o.metadata.name).join(", ")})`);
