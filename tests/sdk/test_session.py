"""Sessions (docs/sessions.md) through the SDK and airlock.e2b against
the real cluster: state kept across steps, a step's value, files in and
out, E2B's README example and the issue's typical use, end to end."""
import asyncio
import os
import signal
import subprocess
import threading
import time

import pytest

import airlock
from airlock import e2b

def wait_session(client, name, phase, timeout=30):
    end = time.monotonic() + timeout
    while True:
        st = client._get(name, "codesessions").get("status") or {}
        if st.get("phase") == phase or time.monotonic() > end:
            return st
        time.sleep(0.2)


def pod_gone(cluster, ns, name, timeout=10):
    from conftest import kubectl

    end = time.monotonic() + timeout
    while True:
        try:
            kubectl(cluster, "-n", ns, "get", "pod", name)
        except Exception:       # noqa: BLE001 - NotFound, as kubectl says it
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.2)


def in_background(fn):
    """fn() in a thread: the thread, started, and a dict that will hold
    its result as "r"."""
    got = {}
    t = threading.Thread(target=lambda: got.__setitem__("r", fn()))
    t.start()
    return t, got


def counted(s, n, timeout=10):
    """s's status once its executions reach n: the count is written after
    a step's own status (a second or two after its start, or with its
    end), so a step just returned may not be in it yet."""
    end = time.monotonic() + timeout
    while (st := s.status()).executions < n and time.monotonic() < end:
        time.sleep(0.1)
    return st


def running_step(c, ns, session, timeout=30):
    """The name of session's step that is Running, once one is."""
    end = time.monotonic() + timeout
    while True:
        for o in c._api.list_namespaced_custom_object(
                "airlock.dev", "v1alpha1", ns, "codeexecutions")["items"]:
            if o["spec"].get("session") == session and \
                    (o.get("status") or {}).get("phase") == "Running":
                return o["metadata"]["name"]
        assert time.monotonic() < end, "no step of %s ran" % session
        time.sleep(0.1)


def test_agent_ends_sessions(cluster, session_client, session_namespace):
    """docs/sessions.md, "Idle timeout and lifetime": with the controller
    stopped, the node agent still ends a session idle past its
    idleTimeoutSeconds and one past its maxLifetimeSeconds, whose running
    step ends Cancelled; their pods are deleted."""
    c = session_client
    idle = c.session("python", idle_timeout=10)
    life = c.session("python", max_lifetime=20)
    assert idle.run("x = 1").phase == "Succeeded"
    t, got = in_background(lambda: life.run("import time\ntime.sleep(120)", timeout=120))
    running_step(c, session_namespace, life.name)
    ctl = int(subprocess.check_output(
        ["pgrep", "-f", "airlock-controller .*--namespace %s " % session_namespace]).split()[0])
    os.kill(ctl, signal.SIGSTOP)
    try:
        a = wait_session(c, idle.name, "Ended", timeout=40)
        b = wait_session(c, life.name, "Ended", timeout=40)
        t.join(20)
        assert (a.get("phase"), a.get("reason"), a.get("message")) == (
            "Ended", "IdleTimeout", "no execution for its idleTimeoutSeconds")
        assert (b.get("phase"), b.get("reason"), b.get("message")) == (
            "Ended", "Expired", "its maxLifetimeSeconds passed")
        assert [(x["type"], x["status"], x["reason"]) for x in a["conditions"]] == [
            ("Ready", "False", "IdleTimeout")]
        assert a.get("endTime")
        r = got["r"]
        assert (r.phase, r.reason, r.message) == (
            "Cancelled", "Cancelled",
            "its session '%s' ended (Expired) while it ran" % life.name), r
        assert pod_gone(cluster, session_namespace, a["podName"])
        assert pod_gone(cluster, session_namespace, b["podName"])
    finally:
        os.kill(ctl, signal.SIGCONT)
        t.join(5)
    # The controller back: the ends stand, and a step is refused with the reason.
    with pytest.raises(airlock.SessionEndedError) as e:
        idle.run("x")
    assert e.value.reason == "IdleTimeout"


def test_restarts_keep_session(session_client, session_namespace):
    """docs/sessions.md, "Restarts": the controller restarted while a step
    runs, then the node agent restarted between steps: the step's result
    is whole, and the session's state is all there after."""
    from conftest import restart_daemon

    with session_client.session("python") as s:
        assert s.run("x = 41").phase == "Succeeded"
        t, got = in_background(lambda: s.run(
            "import time\ntime.sleep(3)\nx += 1\nprint('slept')\nx", timeout=60))
        name = s.name
        running_step(session_client, session_namespace, name)
        restart_daemon(session_namespace, 0)
        t.join(60)
        r = got["r"]
        assert (r.phase, r.stdout, r.value) == ("Succeeded", "slept\n", "42"), r
        restart_daemon(session_namespace, 1)
        r = s.run("x + 1")
        assert (r.phase, r.value) == ("Succeeded", "43"), r
        st = counted(s, 3)
        assert (st.name, st.phase, st.executions, st.restarts) == (name, "Ready", 3, 0)


def test_cancel_interrupts_step(session_client, session_namespace):
    """spec.cancel of a running step: it ends Cancelled, and its kernel is
    interrupted then (not at the step's 900 s timeout), so the next step
    runs at once, with the session's state."""
    c = session_client
    with c.session("python") as s:
        s.run("x = 5")
        t, got = in_background(lambda: s.run(
            "import time\nprint('sleeping', flush=True)\ntime.sleep(600)", timeout=900))
        c._api.patch_namespaced_custom_object(
            "airlock.dev", "v1alpha1", session_namespace, "codeexecutions",
            running_step(c, session_namespace, s.name), {"spec": {"cancel": True}})
        t.join(60)
        r = got["r"]
        assert (r.phase, r.reason, r.message) == (
            "Cancelled", "Cancelled", "cancelled by spec.cancel"), r
        # Busy in the sleep, the kernel would hold this step past its 30 s.
        r = s.run("x * 2", timeout=30)
        assert (r.phase, r.value) == ("Succeeded", "10"), r


def test_delete_while_running(cluster, session_client, session_namespace):
    """The session deleted while a step runs: the step ends Failed,
    PodDeleted, saying so; the sandbox's pod is gone within 5 s."""
    c = session_client
    s = c.session("python")
    pod = s.status().pod_name
    t, got = in_background(lambda: s.run("import time\ntime.sleep(600)", timeout=900))
    running_step(c, session_namespace, s.name)
    c._api.delete_namespaced_custom_object("airlock.dev", "v1alpha1", session_namespace,
                                           "codesessions", s.name)
    assert pod_gone(cluster, session_namespace, pod, timeout=5)
    t.join(60)
    r = got["r"]
    assert (r.phase, r.reason, r.message) == (
        "Failed", "PodDeleted", "its session '%s' ended (deleted) while it ran" % s.name), r


# A step's process kills the session's step server (`warm --serve`, same
# user) while holding its stdout, the agent's record stream, open: no EOF
# comes, only containerd's exit of the server's exec.
KILL_SERVER = """
import os, signal, time
def stat(p):
    try:
        return open('/proc/%d/stat' % p).read().split()[2]
    except OSError:
        return 'gone'
serve = next(int(p) for p in os.listdir('/proc') if p.isdigit() and
             open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')[1:2] == [b'--serve'])
r, w = os.pipe()
if os.fork() == 0:
    held = os.open('/proc/%d/fd/1' % serve, os.O_WRONLY)
    os.kill(serve, signal.SIGKILL)
    while stat(serve) not in ('Z', 'gone'):
        time.sleep(0.01)
    os.write(w, b'k')
    time.sleep(600)
    os._exit(0)
os.read(r, 1)
"""


# A step's process writes into the step server's stdout, as if it were
# the server: what is not its records ends the server, and the step.
FORGE = """
import os
serve = next(int(p) for p in os.listdir('/proc') if p.isdigit() and
             open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')[1:2] == [b'--serve'])
fd = os.open('/proc/%d/fd/1' % serve, os.O_WRONLY)
os.write(fd, b'not a record\\n')
print('after')
"""


def test_step_server_killed_or_forged(session_client):
    """docs/sessions.md, "The step server": a step whose process kills the
    step server, its record stream held open, ends ResultLost (not at the
    agent's backstop, 45 s later, with the session), as does one whose
    process writes into that stream what is not records; neither is run
    again, and the next step gets a new server and the same kernel, its
    state kept."""
    s = session_client.session("python")
    assert s.run("x = 5").phase == "Succeeded"
    for code, why in ((KILL_SERVER, "ended while it ran"),
                      (FORGE, "wrote what is not its records while it ran")):
        r = s.run(code, timeout=30)
        assert (r.phase, r.reason) == ("Failed", "ResultLost"), r
        assert r.message.endswith("its session's step server %s: its output cannot "
                                  "be had, and it is not run again; what it wrote is "
                                  "not known" % why), r.message
        r = s.run("x")
        assert (r.phase, r.value) == ("Succeeded", "5"), r
    st = counted(s, 5)
    assert (st.phase, st.restarts, st.executions) == ("Ready", 0, 5), st
    s.close()


def test_oom_restarts_kernel(session_client):
    """docs/sessions.md, "Failure semantics": past its memory limit, the
    kernel is killed inside the sandbox (gVisor's own OOM killer): the
    step ends OOMKilled, saying the kernel was started again; the session
    stays, its state lost, and status.restarts counts it."""
    c = session_client
    s = c.session("python", resources={"memory": "128Mi"})
    assert s.run("x = 1").phase == "Succeeded"
    r = s.run("a = []\nprint('start', flush=True)\n"
              "while True: a.append(bytearray(8 << 20))", timeout=60)
    assert (r.phase, r.reason, r.stdout) == ("Failed", "OOMKilled", "start\n"), r
    assert r.message == ("out of memory; the session's kernel died under it and was "
                         "started again: its state is lost"), r.message
    r = s.run("x")
    assert r.stderr.endswith("NameError: name 'x' is not defined\n"), r
    st = counted(s, 3)
    assert (st.phase, st.restarts, st.executions) == ("Ready", 1, 3), st
    s.close()


def test_state_across_steps(session_client):
    c = session_client
    with c.session("python", idle_timeout=600) as s:
        assert s.name.startswith("session-")
        r1 = s.run("x = 1\nimport os\ncwd = os.getcwd()")
        assert (r1.phase, r1.value, r1.stdout, r1.start_mode) == (
            "Succeeded", None, "", "Session")
        r2 = s.run("x += 1\nx")
        assert (r2.phase, r2.value, r2.stdout) == ("Succeeded", "2", "")
        r3 = s.run("print(x * 10)\nos.getcwd() == cwd")
        assert (r3.stdout, r3.value, r3.exit_code) == ("20\n", "True", 0)
        st = counted(s, 3)
        assert (st.phase, st.reason, st.executions, st.restarts) == ("Ready", None, 3, 0)
        assert st.pod_name and st.node_name
        name = s.name
    # Closed, not deleted: the record stays for its TTL.
    st = wait_session(c, name, "Ended")
    assert (st.get("phase"), st.get("reason")) == ("Ended", "Closed")
    assert c._get(name, "codesessions")["spec"]["close"] is True
    with pytest.raises(airlock.SessionEndedError) as e:
        s.run("x")
    assert e.value.reason == "Closed"


def test_value_and_error(session_client):
    with session_client.session("python") as s:
        assert s.run("'a' * 3").value == "'aaa'"
        assert s.run("None").value is None
        r = s.run("print('before')\n1/0")
        assert (r.phase, r.reason, r.exit_code, r.stdout) == ("Failed", "Error", 1, "before\n")
        assert r.stderr.startswith("Traceback (most recent call last):\n")
        assert r.stderr.endswith("ZeroDivisionError: division by zero\n")
        assert r.value is None
        # The exception did not end the session.
        assert s.run("6 * 7").value == "42"


def test_timeout_and_exit(session_client):
    """docs/sessions.md, "Failure semantics": a timeout interrupts the step
    and keeps the state; sys.exit starts the kernel again, and loses it."""
    with session_client.session("python") as s:
        s.run("x = 7")
        r = s.run("import time\nwhile True:\n    time.sleep(0.05)", timeout=2)
        assert (r.phase, r.reason, r.exit_code) == ("TimedOut", "DeadlineExceeded", 124)
        assert r.message.startswith("interrupted at its 2000 ms timeout"), r.message
        assert "KeyboardInterrupt" in r.stderr
        assert s.run("x").value == "7"
        r = s.run("import sys\nsys.exit(3)")
        assert (r.phase, r.reason, r.exit_code) == ("Failed", "Error", 3)
        assert "started again: its state is lost" in r.message, r.message
        r = s.run("x")
        assert (r.phase, r.exit_code) == ("Failed", 1)
        assert r.stderr.endswith("NameError: name 'x' is not defined\n"), r.stderr
        assert s.run("y = 1\ny").value == "1"


def test_uninterruptible_restarts(session_client):
    """A loop that ignores the interrupt: killed after the grace, a new
    kernel started, and the message says the state is lost."""
    with session_client.session("python") as s:
        s.run("x = 1")
        r = s.run("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                  "while True:\n    time.sleep(0.05)", timeout=1)
        assert (r.phase, r.reason, r.exit_code) == ("TimedOut", "DeadlineExceeded", 124)
        assert "was not back within 5000 ms of the interrupt and was started again: " \
            "the session's state is lost" in r.message, r.message
        r = s.run("x")
        assert r.stderr.endswith("NameError: name 'x' is not defined\n"), r.stderr
        assert s.run("2 + 2").value == "4"


def test_kernel_dies_between_steps(session_client):
    """A kernel that dies while no step runs (a background thread's
    os._exit): the next step runs on a new kernel and says the session's
    state is lost; the session's restarts count it, once."""
    with session_client.session("python") as s:
        r = s.run("x = 1\nimport os, threading, time\n"
                  "threading.Thread(target=lambda: (time.sleep(0.5), os._exit(0))).start()")
        assert r.phase == "Succeeded", r.message
        time.sleep(2)
        r = s.run("print('x' in globals())\n6 * 7")
        assert (r.phase, r.exit_code, r.stdout, r.value) == ("Succeeded", 0, "False\n", "42")
        assert "; the session's kernel was no longer running when this step began " \
            "(it had died since an earlier step) and was started again: the " \
            "session's earlier state is lost" in r.message, r.message
        assert r.stderr == "airlock: the session's kernel was not running at this " \
            "step's start; a new one was started, and the session's earlier state " \
            "is lost\n", r.stderr
        # The session's count is written after the step's own status.
        end = time.monotonic() + 10
        while (st := s.status()).restarts < 1 and time.monotonic() < end:
            time.sleep(0.2)
        assert st.restarts == 1
        r = s.run("x = 2\nx")
        assert (r.value, r.stderr) == ("2", "")
        assert "no longer running" not in r.message, r.message
        assert s.status().restarts == 1


def test_sessions_apart(session_client):
    """Two sessions never share a sandbox: their pods, globals and files
    are their own."""
    with session_client.session("python") as a, session_client.session("python") as b:
        a.run("secret = 'a'\nopen('only-a.txt', 'w').write('a')")
        assert a.status().pod_name != b.status().pod_name
        r = b.run("secret")
        assert r.stderr.endswith("NameError: name 'secret' is not defined\n"), r.stderr
        r = b.run("import os\nos.path.exists('only-a.txt')")
        assert r.value == "False"
        assert a.run("open('only-a.txt').read()").value == "'a'"


def test_bash_session(session_client):
    """A bash session: one shell sources each step; variables, functions,
    the working directory and its files are kept."""
    with session_client.session("bash") as s:
        r = s.run("A=41\nf() { echo \"f:$1\"; }\nmkdir -p d && cd d && echo hi > t")
        assert (r.phase, r.stdout) == ("Succeeded", "")
        r = s.run("f $((A + 1)); cat t; basename \"$PWD\"")
        assert (r.phase, r.stdout, r.exit_code) == ("Succeeded", "f:42\nhi\nd\n", 0)
        r = s.run("false")
        assert (r.phase, r.exit_code) == ("Failed", 1)
        assert s.run("echo $A").stdout == "41\n"


def test_files(session_client):
    data = bytes(range(256)) * 512                         # 128 KiB: two write steps
    with session_client.session("python", files={"data.csv": "a,b\n1,2\n"}) as s:
        path = s.files.write("sub/blob.bin", data)
        assert path.endswith("/sub/blob.bin") and path.startswith("/")
        assert s.files.read("sub/blob.bin", format="bytes") == data
        assert s.files.read(path, format="bytes") == data
        assert s.run("len(open('sub/blob.bin', 'rb').read())").value == str(len(data))
        assert s.files.read("data.csv") == "a,b\n1,2\n"
        assert [(f.name, f.type) for f in s.files.list("sub")] == [("blob.bin", "file")]
        with pytest.raises(airlock.SessionFileNotFoundError):
            s.files.read("missing.txt")
        # The files' steps left nothing in the session's globals.
        assert s.run("sorted(k for k in globals() if not k.startswith('__'))").value == "[]"


def test_rejected_runtime(session_client):
    with pytest.raises(airlock.RejectedError) as e:
        session_client.session("cobol")
    assert e.value.field == "spec.runtime"


def test_async_session(cluster, session_namespace):
    async def main():
        ac = airlock.AsyncClient(namespace=session_namespace,
                                 kubeconfig=cluster["KUBECONFIG_ADMIN"])
        async with ac.session("python") as s:
            await s.run("n = 5")
            r = await s.run("n * 2")
            await s.files.write("f.txt", "hello")
            text = await s.files.read("f.txt")
        return r, text, s
    r, text, s = asyncio.run(main())
    assert (r.value, text) == ("10", "hello")
    assert s.sync.closed


def test_e2b_readme(e2b_kubeconfig):
    """E2B's README example, only the import changed."""
    with e2b.Sandbox.create() as sandbox:
        sandbox.run_code("x = 1")
        execution = sandbox.run_code("x+=1; x")
        assert execution.text == "2"
        assert execution.logs.stdout == [] and execution.error is None


def test_e2b_exception(e2b_kubeconfig):
    with e2b.Sandbox() as sandbox:
        execution = sandbox.run_code("print('a')\n1/0")
        assert execution.error.name == "ZeroDivisionError"
        assert execution.error.value == "division by zero"
        assert execution.error.traceback.startswith("Traceback (most recent call last):")
        assert execution.logs.stdout == ["a\n"]
        assert execution.logs.stderr == []
        assert execution.text is None
        with pytest.raises(e2b.TimeoutException):
            sandbox.run_code("import time\nwhile True: time.sleep(0.1)", timeout=2)
        assert sandbox.run_code("x = 3; x").text == "3"


def test_e2b_typical(e2b_kubeconfig):
    """The issue's typical use: a DataFrame, a plot saved and read back."""
    sandbox = e2b.Sandbox()
    try:
        sandbox.run_code("import pandas as pd\n"
                         "df = pd.DataFrame({'a': [1, 2, 3, 4], 'b': [2.0, 4.0, 6.0, 8.0]})")
        execution = sandbox.run_code(
            "import matplotlib.pyplot as plt\n"
            "df.plot(x='a', y='b')\n"
            "plt.savefig('/tmp/plot.png')\n"
            "print(df.describe())")
        assert execution.error is None
        out = "".join(execution.logs.stdout)
        assert out.splitlines()[0].split() == ["a", "b"]
        assert out.splitlines()[1].split() == ["count", "4.000000", "4.000000"]
        assert out.splitlines()[2].split() == ["mean", "2.500000", "5.000000"]
        # The figure left open is a display result too, as in a notebook.
        assert [(r.is_main_result, r.text) for r in execution.results] == [(False, "<Figure>")]
        png = sandbox.files.read("/tmp/plot.png", format="bytes")
        assert png.startswith(b"\x89PNG")
        assert execution.results[0].png is not None
    finally:
        assert sandbox.close() is True
