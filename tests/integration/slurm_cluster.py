"""A one-node Slurm cluster on this machine, in a temporary folder: munged with a fresh key,
slurmctld and slurmd (Debian's Slurm 22.05) on free loopback ports, slurm.conf written there
and named by SLURM_CONF for the commands; and an htamd whose worker pool submits to it. Used by slurm_pool_test.py and
tests/bench/slurm_pool_bench.py.

OneNodeSlurm.unavailable() says why a cluster cannot start here (not root, a program missing),
and start() raises ClusterUnavailable with the daemons' own last log lines when one does not come
up, so that callers can skip with the exact reason.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

import htam

HTAMD = os.environ.get("HTAM_HTAMD", "build/daemon/htamd")
KEYGEN = os.environ.get("HTAM_KEYGEN", "build/daemon/server/htam-keygen")

PROGRAMS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd",
            "sbatch": "slurm-client", "squeue": "slurm-client", "scancel": "slurm-client",
            "sinfo": "slurm-client", "scontrol": "slurm-client"}
SBIN = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]


def start_daemon(tmp, slurm, job_name, options=(), pool=True, worker_conf_text=None):
    """htamd with no local devices, CURVE on its worker endpoint and (with `pool`) a Slurm pool
    of CPU workers called `job_name`; `options` go last on its command line. Returns (process,
    client endpoint, log path); the worker endpoint, key folder and worker.conf are in tmp."""
    keys = os.path.join(tmp, "keys")
    subprocess.run([KEYGEN, keys, "server"], check=True, capture_output=True)
    worker_conf = os.path.join(tmp, "worker.conf")
    with open(worker_conf, "w") as f:
        # Fewer timed repetitions than the default: the test is about the pool, not timing.
        f.write(worker_conf_text if worker_conf_text is not None else
                "[eval]\nrepetitions = 10\nwarmup_reps = 2\nwarmup_ms = 5\nseeds = 1\n")
    endpoint = f"ipc://{tmp}/htamd.sock"
    worker_endpoint = f"tcp://127.0.0.1:{free_port()}"
    with open(os.path.join(tmp, "worker_endpoint"), "w") as f:
        f.write(worker_endpoint)
    log_path = os.path.join(tmp, "htamd.log")
    argv = [os.path.abspath(HTAMD), "--general.data_dir", os.path.join(tmp, "data"),
            "--server.bind", endpoint, "--worker.local", "false",
            "--worker.endpoint", worker_endpoint, "--worker.curve", "true",
            "--worker.heartbeat_ms", "500",
            "--server.curve_secret_key_file", os.path.join(keys, "server.key"),
            *(["--pool.manager", "slurm", "--pool.backends", "cpu", "--pool.interval_ms", "300",
               "--pool.cpus_per_job", "1", "--pool.mem_mb", "0", "--pool.time_limit", "30:00",
               "--pool.job_name", job_name, "--pool.worker_config", worker_conf,
               "--pool.worker_data_dir", os.path.join(tmp, "worker")] if pool else []),
            *options]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=tmp, stdout=log, stderr=subprocess.STDOUT,
                                env=slurm.env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            htam.Client(endpoint, timeout_s=0.5, retries=0).close()
            return proc, endpoint, log_path
        except htam.HtamTimeout:
            time.sleep(0.2)
    stop_daemon(proc)
    with open(log_path, errors="replace") as f:
        raise RuntimeError("htamd did not come up:\n" + f.read())


def stop_daemon(proc):
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()



class ClusterUnavailable(Exception):
    pass


def which(name):
    path = shutil.which(name)
    if path:
        return path
    for d in SBIN:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, lines=8):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


class OneNodeSlurm:
    def __init__(self, folder, cpus=8, node="htamnode"):
        self.dir = folder
        self.cpus = cpus
        self.node = node
        self.conf = os.path.join(folder, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.started = []

    @staticmethod
    def unavailable():
        """Why no cluster can start here, or None."""
        if os.geteuid() != 0:
            return "a one-node Slurm cluster needs root here (slurmd runs jobs as their users)"
        missing = sorted({pkg for prog, pkg in PROGRAMS.items() if not which(prog)})
        if missing:
            return ("Slurm is not installed (missing Debian packages: " + " ".join(missing) +
                    "; tools/setup.sh installs them)")
        return None

    def _write_conf(self):
        d = self.dir
        ctld, slurmd = free_port(), free_port()
        conf = f"""ClusterName=htamtest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge.sock
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
ReturnToService=2
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmdSpoolDir={d}/spool
StateSaveLocation={d}/state
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
KillWait=10
MinJobAge=2
SlurmdParameters=config_overrides
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w") as f:
            f.write(conf)

    def start(self, timeout_s=30):
        d = self.dir
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        with open(os.path.join(d, "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(d, "munge.key"), 0o600)
        self._write_conf()
        self._run([which("munged"), "--force", f"--key-file={d}/munge.key",
                   f"--socket={d}/munge.sock", f"--pid-file={d}/munged.pid",
                   f"--log-file={d}/munged.log", f"--seed-file={d}/munge.seed"],
                  "munged", f"{d}/munged.log")
        self.started.append(f"{d}/munged.pid")
        self._run([which("slurmctld"), "-c", "-f", self.conf], "slurmctld", f"{d}/slurmctld.log")
        self.started.append(f"{d}/slurmctld.pid")
        self._run([which("slurmd"), "-f", self.conf, "-N", self.node], "slurmd",
                  f"{d}/slurmd.log")
        self.started.append(f"{d}/slurmd.pid")
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            r = subprocess.run([which("sinfo"), "-h", "-N", "-o", "%T"], env=self.env,
                               capture_output=True, text=True)
            state = (r.stdout + r.stderr).strip()
            if r.returncode == 0 and state in ("idle", "mixed", "allocated"):
                return
            time.sleep(0.3)
        raise ClusterUnavailable(
            f"the one-node Slurm cluster did not come up in {timeout_s} s (node state "
            f"'{state}'):\nslurmctld: {tail(d + '/slurmctld.log')}\nslurmd: {tail(d + '/slurmd.log')}")

    def _run(self, argv, name, log):
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True)
        if r.returncode != 0:
            raise ClusterUnavailable(f"{name} did not start (exit {r.returncode}): "
                                     f"{(r.stdout + r.stderr).strip()}\n{tail(log)}")

    def squeue(self, name):
        """{job id: state} of the jobs called `name`."""
        r = subprocess.run([which("squeue"), "-h", f"--name={name}", "-o", "%i %T"],
                           env=self.env, capture_output=True, text=True, check=True)
        return dict(line.split() for line in r.stdout.splitlines() if line.strip())

    def stored_job(self, job_id):
        """What Slurm keeps of a job and shows its owner and operators: the batch script as
        stored (scontrol write batch_script) and the job record with its details."""
        script = subprocess.run([which("scontrol"), "write", "batch_script", str(job_id), "-"],
                                env=self.env, capture_output=True, text=True, check=True).stdout
        record = subprocess.run([which("scontrol"), "show", "job", "-dd", str(job_id)],
                                env=self.env, capture_output=True, text=True, check=True).stdout
        return script, record

    def scancel(self, job_id):
        subprocess.run([which("scancel"), str(job_id)], env=self.env, check=True)

    def stop(self):
        for pidfile in reversed(self.started):
            try:
                with open(pidfile) as f:
                    pid = int(f.read().strip())
            except (OSError, ValueError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.started = []
