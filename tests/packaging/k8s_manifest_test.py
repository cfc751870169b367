"""htam's Kubernetes manifests (tools/packaging/k8s/base) as kubectl would apply them: keys made
with htam-keygen as the kustomization says, every object checked against the Kubernetes API's
schemas by kubernetes-models (npm, pinned in tests/packaging/k8s/package-lock.json, installed by
tools/setup.sh) and the pieces checked to fit (tests/packaging/k8s/validate.mjs). Broken copies
(a wrong type, a Service the workers cannot reach, a missing key, a selector that matches no pod)
must be refused, naming what is wrong.

Exit 77 (ctest: skipped) with the reason where node or the npm packages are missing.
Needs HTAM_KEYGEN; ctest sets it.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BASE = os.path.join(ROOT, "tools", "packaging", "k8s", "base")
NODE_DIR = os.path.join(HERE, "k8s")
KEYGEN = os.environ.get("HTAM_KEYGEN", os.path.join(ROOT, "build", "daemon", "server", "htam-keygen"))


def make_copy(tmp):
    dst = os.path.join(tmp, "base")
    shutil.copytree(BASE, dst, ignore=shutil.ignore_patterns("keys"))
    keys = os.path.join(dst, "keys")
    subprocess.run([KEYGEN, keys, "server", "worker"], check=True, capture_output=True)
    # As the kustomization's comment says: grep '^public' keys/worker.pub > keys/workers
    with open(os.path.join(keys, "worker.pub")) as f:
        lines = [l for l in f if l.startswith("public")]
    with open(os.path.join(keys, "workers"), "w") as f:
        f.writelines(lines)
    open(os.path.join(keys, "clients"), "w").close()
    return dst


def validate(folder):
    r = subprocess.run(["node", os.path.join(NODE_DIR, "validate.mjs"), folder], cwd=NODE_DIR,
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def edit(folder, name, old, new):
    path = os.path.join(folder, name)
    with open(path) as f:
        text = f.read()
    assert old in text, (name, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new))


class K8sManifestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("node"):
            print("SKIP: node is not installed (tools/setup.sh installs Debian's nodejs)")
            sys.exit(77)
        if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "kubernetes-models")):
            print("SKIP: the manifest validators are not installed (tools/setup.sh runs npm ci "
                  "in tests/packaging/k8s)")
            sys.exit(77)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="htam-k8s-")
        self.base = make_copy(self.tmp)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_base_is_valid(self):
        code, out = validate(self.base)
        self.assertEqual(code, 0, out)
        for obj in ("Namespace/htam", "Service/htamd", "StatefulSet/htamd", "DaemonSet/htam-worker",
                    "Secret/htamd-keys", "Secret/htam-worker-keys"):
            self.assertIn(obj, out)

    def test_schema_errors_are_refused(self):
        edit(self.base, "htamd-statefulset.yaml", "replicas: 1", 'replicas: "one"')
        code, out = validate(self.base)
        self.assertEqual(code, 1, out)
        self.assertIn("StatefulSet/htamd: data/spec/replicas must be integer", out)

    def test_workers_must_dial_the_service(self):
        edit(self.base, "worker-daemonset.yaml", "tcp://htamd.htam.svc:7879",
             "tcp://htamd.htam.svc:7880")
        code, out = validate(self.base)
        self.assertEqual(code, 1, out)
        self.assertIn("--worker.connect tcp://htamd.htam.svc:7880 is no port of a Service", out)

    def test_keys_must_exist(self):
        os.remove(os.path.join(self.base, "keys", "worker.key"))
        code, out = validate(self.base)
        self.assertEqual(code, 1, out)
        self.assertIn("file keys/worker.key does not exist", out)

    def test_selectors_must_match(self):
        edit(self.base, "htamd-service.yaml", "selector: {app.kubernetes.io/name: htamd}",
             "selector: {app.kubernetes.io/name: htam}")
        code, out = validate(self.base)
        self.assertEqual(code, 1, out)
        self.assertIn("Service/htamd: its selector matches no pod template", out)


if __name__ == "__main__":
    unittest.main()
