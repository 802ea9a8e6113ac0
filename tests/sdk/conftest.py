"""The SDK's tests run against the real test cluster (tests/cluster, with
the gVisor node): a namespace of their own, with this clone's controller
and node agent watching it, as the e2e tests do."""
import os
import random
import secrets
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

TOP = os.environ.get("AIRLOCK_TOP") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("AIRLOCK_BIN") or os.path.join(TOP, "bin")


def cluster_env():
    path = os.environ.get("AIRLOCK_CLUSTER_ENV") or os.path.join(TOP, ".cluster", "env")
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                env[k] = v.strip('"')
    if "NODE_NAME" not in env:
        raise RuntimeError("the SDK's tests need the gVisor node: NODE=1 tests/cluster/up.sh")
    return env


_handed = set()


def free_port():
    """A port on 127.0.0.1 nothing listens on now, in 10000-19999, never
    the same twice: as it_free_port (tests/support/itutil.h). Below the
    ephemeral range, so no outgoing connection takes it before the daemon
    it is for binds it; a kernel-chosen one (bind to 0) is ephemeral."""
    rnd = random.SystemRandom()
    for _ in range(200):
        port = rnd.randrange(10000, 20000)
        if port in _handed:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        _handed.add(port)
        return port
    raise RuntimeError("no free port in 10000-19999")


def kubectl(env, *args, stdin=None):
    return subprocess.run([env["KUBECTL"], "--kubeconfig", env["KUBECONFIG_ADMIN"], *args],
                          input=stdin, capture_output=True, text=True, check=True).stdout


INSTALL = """apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: airlock-execution}
value: 0
preemptionPolicy: Never
"""

# A tenant: the restricted user may run code in the test's namespace only.
TENANT = """apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sdk-tenant, namespace: %(ns)s}
rules:
- apiGroups: [airlock.dev]
  resources: [codeexecutions]
  verbs: [create, get, list, watch, patch, delete]
- apiGroups: [airlock.dev]
  resources: [codeexecutionartifacts]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sdk-tenant, namespace: %(ns)s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sdk-tenant}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: airlock-restricted}
"""


def new_namespace(env, prefix, crds):
    """The CRDs crds applied and Established, the RuntimeClass and
    PriorityClass (INSTALL), and a new namespace prefix-RANDOM: its name."""
    ns = prefix + secrets.token_hex(4)
    for crd in crds:
        kubectl(env, "apply", "--server-side", "-f",
                os.path.join(TOP, "crds", "airlock.dev_%s.yaml" % crd))
        kubectl(env, "wait", "--for=condition=Established", "crd/%s.airlock.dev" % crd)
    kubectl(env, "apply", "--server-side", "-f", "-", stdin=INSTALL)
    kubectl(env, "create", "namespace", ns)
    return ns


@pytest.fixture(scope="session")
def cluster():
    return cluster_env()


@pytest.fixture(scope="session")
def namespace(cluster, tmp_path_factory):
    """A namespace with a controller and a node agent of its own."""
    env = cluster
    ns = new_namespace(env, "sdk-", ("codeexecutions", "codeexecutionartifacts"))
    work = tmp_path_factory.mktemp("daemons")
    kubectl(env, "apply", "-f", "-", stdin=TENANT % {"ns": ns})
    conf = work / "config.yaml"
    conf.write_text(
        "profiles:\n"
        "  python:\n    image: %s\n    command: [/airlock/bin/run, python3, main.py]\n"
        "    sourceFile: main.py\n"
        "  bash:\n    image: %s\n    command: [/airlock/bin/run, bash, main.sh]\n"
        "    sourceFile: main.sh\n" % (env["RUNNER_PYTHON_IMAGE"], env["RUNNER_BASH_IMAGE"]))
    logs = os.path.join(TOP, "build", "logs")
    os.makedirs(logs, exist_ok=True)
    aaddr = "127.0.0.1:%d" % free_port()
    procs = []
    with open(os.path.join(logs, "sdk-controller-%s.log" % ns), "w") as log:
        procs.append(subprocess.Popen(
            [os.path.join(BIN, "airlock-controller"), "--config", str(conf), "--kubeconfig",
             env["KUBECONFIG_ADMIN"], "--namespace", ns, "--lease-namespace", ns,
             "--metrics-addr", "127.0.0.1:%d" % free_port()], stdout=log, stderr=log))
    with open(os.path.join(logs, "sdk-agent-%s.log" % ns), "w") as log:
        procs.append(subprocess.Popen(
            [os.path.join(BIN, "airlock-node-agent"), "--kubeconfig", env["KUBECONFIG_ADMIN"],
             "--node-name", env["NODE_NAME"], "--namespace", ns, "--pod-logs-dir",
             env["POD_LOGS_DIR"], "--containerd-socket", env["CONTAINERD_SOCK"],
             "--cgroup-root", env["CGROUP_ROOT"], "--metrics-addr", aaddr,
             "--runsc", env["RUNSC"], "--runsc-root", env["RUNSC_ROOT"]],
            stdout=log, stderr=log))
    wait_ready(aaddr, "node agent")
    yield ns
    codes = []
    for p in procs:
        p.send_signal(signal.SIGTERM)
        codes.append(p.wait(timeout=30))
    kubectl(env, "delete", "namespace", ns, "--wait=false")
    assert codes == [0, 0], "the daemons did not exit cleanly on SIGTERM: %s" % codes


@pytest.fixture
def client(cluster, namespace):
    import airlock

    return airlock.Client(namespace=namespace, kubeconfig=cluster["KUBECONFIG_ADMIN"])


def wait_ready(addr, what, timeout=60):
    end = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen("http://%s/readyz" % addr, timeout=1)
            return
        except OSError:
            if time.monotonic() > end:
                raise RuntimeError("the %s was not ready in %d s" % (what, timeout))
            time.sleep(0.2)


# The daemons each namespace's fixture started: [controller, agent], as
# Popen objects with .argv, .log and .addr; restart_daemon replaces one.
DAEMONS = {}


def restart_daemon(ns, which):
    """Stop ns's controller (which 0) or node agent (1) with SIGTERM (it
    must exit 0), start it again with the same arguments, appending to
    its log, and wait until it is ready."""
    old = DAEMONS[ns][which]
    old.send_signal(signal.SIGTERM)
    assert old.wait(timeout=30) == 0, "the daemon did not exit cleanly on SIGTERM"
    with open(old.log, "a") as log:
        new = subprocess.Popen(old.argv, stdout=log, stderr=log)
    new.argv, new.log, new.addr = old.argv, old.log, old.addr
    DAEMONS[ns][which] = new
    wait_ready(new.addr, ("controller", "node agent")[which])
    return new


def start_daemons(env, ns, conf_text, work):
    """This clone's controller (with conf_text as its config) and node
    agent, watching ns; the processes, once the agent is ready (kept in
    DAEMONS[ns])."""
    conf = work / "config.yaml"
    conf.write_text(conf_text)
    logs = os.path.join(TOP, "build", "logs")
    os.makedirs(logs, exist_ok=True)
    aaddr = "127.0.0.1:%d" % free_port()
    caddr = "127.0.0.1:%d" % free_port()
    common = ["--kubeconfig", env["KUBECONFIG_ADMIN"], "--namespace", ns]
    procs = []
    for what, addr, argv in (
            ("controller", caddr, [os.path.join(BIN, "airlock-controller"), "--config",
                                   str(conf)] +
             common + ["--lease-namespace", ns, "--metrics-addr", caddr]),
            ("agent", aaddr, [os.path.join(BIN, "airlock-node-agent")] + common +
             ["--node-name", env["NODE_NAME"], "--pod-logs-dir", env["POD_LOGS_DIR"],
              "--containerd-socket", env["CONTAINERD_SOCK"], "--cgroup-root",
              env["CGROUP_ROOT"], "--metrics-addr", aaddr, "--runsc", env["RUNSC"],
              "--runsc-root", env["RUNSC_ROOT"]])):
        path = os.path.join(logs, "sdk-%s-%s.log" % (what, ns))
        with open(path, "w") as log:
            p = subprocess.Popen(argv, stdout=log, stderr=log)
        p.argv, p.log, p.addr = argv, path, addr
        procs.append(p)
    DAEMONS[ns] = procs
    wait_ready(aaddr, "node agent")
    return procs


SESSION_CRDS = ("codeexecutions", "codeexecutionartifacts", "codesessions")


@pytest.fixture(scope="session")
def session_namespace(cluster, tmp_path_factory):
    """A namespace for sessions' tests (test_session.py): the CodeSession
    CRD too, and python-data (airlock.e2b's runtime) among the profiles."""
    env = cluster
    ns = new_namespace(env, "sdks-", SESSION_CRDS)
    profile = "  %s:\n    image: %s\n    command: [/airlock/bin/run, %s, %s]\n" \
              "    sourceFile: %s\n"
    # More stored sessions than the default 20: its tests end theirs, and
    # an ended one is kept until its TTL (an hour).
    procs = start_daemons(env, ns, "quota: {storedSessions: 60}\nprofiles:\n" + "".join(
        profile % (name, env[image], interp, src, src) for name, image, interp, src in (
            ("python", "RUNNER_PYTHON_IMAGE", "python3", "main.py"),
            ("python-data", "RUNNER_PYTHON_DATA_IMAGE", "python3", "main.py"),
            ("bash", "RUNNER_BASH_IMAGE", "bash", "main.sh"))),
        tmp_path_factory.mktemp("session-daemons"))
    yield ns
    procs = DAEMONS.pop(ns)         # as restarted, if they were
    for p in procs:
        p.send_signal(signal.SIGTERM)
    codes = [p.wait(timeout=30) for p in procs]
    kubectl(env, "delete", "namespace", ns, "--wait=false")
    assert codes == [0, 0], "the daemons did not exit cleanly on SIGTERM: %s" % codes


@pytest.fixture
def session_client(cluster, session_namespace):
    import airlock

    return airlock.Client(namespace=session_namespace, kubeconfig=cluster["KUBECONFIG_ADMIN"])


@pytest.fixture
def e2b_kubeconfig(cluster, session_namespace, tmp_path, monkeypatch):
    """$KUBECONFIG with session_namespace as its contexts' namespace: what
    airlock.e2b.Sandbox() (Client()'s defaults) uses."""
    import shutil

    path = str(tmp_path / "kubeconfig")
    shutil.copyfile(cluster["KUBECONFIG_ADMIN"], path)
    subprocess.run([cluster["KUBECTL"], "--kubeconfig", path, "config", "set-context",
                    "--current", "--namespace", session_namespace], check=True,
                   capture_output=True)
    monkeypatch.setenv("KUBECONFIG", path)
    return session_namespace
