"""A profile's preload on the real node (issue 31, docs/warm-path.md, "The
zygote"): a warm execution of a preload profile runs in a child the
holder's zygote forked, the modules imported there and not again; a
denied module it preloaded stays out of the program's reach by name; a
module the image lacks keeps the holder from ever being ready, and an
Event says why."""
import json
import time

import pytest

from conftest import DAEMONS, kubectl, new_namespace, start_daemons

CRDS = ("codeexecutions", "codeexecutionartifacts", "codeexecutionpools")
POOL = """apiVersion: airlock.dev/v1alpha1
kind: CodeExecutionPool
metadata: {name: %s}
spec: {runtime: %s, replicas: %d}
"""


@pytest.fixture(scope="module")
def preload_ns(cluster, tmp_path_factory):
    """A namespace whose python-data profiles preload pandas: one plain,
    one with a code policy denying subprocess (which pandas imports), one
    naming a module the image lacks."""
    env = cluster
    ns = new_namespace(env, "sdkp-", CRDS)
    profile = ("  %s:\n    image: %s\n    command: [/airlock/bin/run, python3, main.py]\n"
               "    sourceFile: main.py\n    preload: [%s]\n%s")
    img = env["RUNNER_PYTHON_DATA_IMAGE"]
    start_daemons(env, ns, "profiles:\n" + "".join((
        profile % ("data", img, "pandas", ""),
        profile % ("data-deny", img, "pandas", "    policy: {denyImports: [subprocess]}\n"),
        profile % ("data-bad", img, "json, nosuchmod_airlock", ""))),
        tmp_path_factory.mktemp("preload-daemons"))
    yield ns
    procs = DAEMONS.pop(ns)
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=30)
    kubectl(env, "delete", "namespace", ns, "--wait=false")


@pytest.fixture
def preload_client(cluster, preload_ns):
    import airlock

    return airlock.Client(namespace=preload_ns, kubeconfig=cluster["KUBECONFIG_ADMIN"])


def get_pool(env, ns, name):
    return json.loads(kubectl(env, "-n", ns, "get", "cxpool", name, "-o", "json"))


def ready_pool(env, ns, name, runtime, n=1, timeout=180):
    """Pool name of runtime, made, once n holders of it are ready."""
    kubectl(env, "-n", ns, "apply", "-f", "-", stdin=POOL % (name, runtime, n))
    end = time.monotonic() + timeout
    while (get_pool(env, ns, name).get("status") or {}).get("readyReplicas") != n:
        assert time.monotonic() < end, "pool %s not ready in %d s" % (name, timeout)
        time.sleep(0.5)


def drop_pool(env, ns, name):
    kubectl(env, "-n", ns, "delete", "cxpool", name, "--wait=false")


def test_preloaded_not_imported_again(cluster, preload_ns, preload_client):
    """The program finds pandas imported at its start (the zygote's), its
    import costs nothing, and it has no fd of the zygote's but 0-2."""
    ready_pool(cluster, preload_ns, "data", "data")
    try:
        r = preload_client.run(
            "import os, sys, time\nhad = 'pandas' in sys.modules\n"
            "t = time.perf_counter()\nimport pandas\n"
            "print(had, time.perf_counter() - t < 0.01, sorted(os.listdir('/proc/self/fd')),"
            " __name__, sys.argv)", runtime="data", timeout=60)
        assert (r.phase, r.start_mode, r.stderr) == ("Succeeded", "Warm", ""), r
        assert r.stdout == "True True ['0', '1', '2', '3'] __main__ ['main.py']\n", r.stdout
    finally:
        drop_pool(cluster, preload_ns, "data")


def test_denied_module_preloaded(cluster, preload_ns, preload_client):
    """subprocess, which pandas imported in the zygote, is refused to the
    program by name (PolicyDenied) and absent from its sys.modules; pandas
    itself, imported in the zygote, is the program's."""
    ready_pool(cluster, preload_ns, "deny", "data-deny", 2)
    try:
        r = preload_client.run("import subprocess\n", runtime="data-deny", timeout=60)
        assert (r.phase, r.reason, r.exit_code, r.start_mode) == (
            "Failed", "PolicyDenied", 120, "Warm"), r
        assert r.stderr == "airlock: policy: import of 'subprocess' refused (main.py line 1)\n", \
            r.stderr
        r = preload_client.run("import sys\nprint(sys.modules.get('subprocess'))\n"
                               "import pandas\nprint(pandas.__name__)", runtime="data-deny",
                               timeout=60)
        assert (r.phase, r.stdout, r.start_mode) == ("Succeeded", "None\npandas\n", "Warm"), r
    finally:
        drop_pool(cluster, preload_ns, "deny")


def test_missing_module_never_ready(cluster, preload_ns):
    """A preload the image cannot import: the holder never becomes ready;
    a Warning Event PreloadFailed on the pool says which module and why,
    and the pool's Ready condition says PreloadFailed."""
    env, ns = cluster, preload_ns
    kubectl(env, "-n", ns, "apply", "-f", "-", stdin=POOL % ("bad", "data-bad", 1))
    try:
        end = time.monotonic() + 180
        while True:
            evs = json.loads(kubectl(env, "-n", ns, "get", "events", "--field-selector",
                                     "reason=PreloadFailed", "-o", "json"))["items"]
            if evs:
                break
            assert time.monotonic() < end, "no PreloadFailed Event in 180 s"
            time.sleep(1)
        ev = evs[0]
        assert (ev["type"], ev["involvedObject"]["kind"], ev["involvedObject"]["name"]) == (
            "Warning", "CodeExecutionPool", "bad"), ev
        assert ev["message"].startswith(
            "airlock: preload: nosuchmod_airlock: ModuleNotFoundError: No module named "
            "'nosuchmod_airlock'"), ev["message"]
        st = get_pool(env, ns, "bad").get("status") or {}
        assert st.get("readyReplicas", 0) == 0, st
        ready = [c for c in st.get("conditions", []) if c["type"] == "Ready"]
        assert ready and (ready[0]["status"], ready[0]["reason"]) == (
            "False", "PreloadFailed"), st
    finally:
        drop_pool(env, ns, "bad")
