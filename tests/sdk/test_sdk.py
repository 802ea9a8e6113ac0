"""airlock (sdk/python) against the real cluster: each argument, each
error, cancel on interrupt, the async client."""
import asyncio
import os
import signal
import subprocess
import threading
import time

import pytest
import yaml

import airlock


def wait_phase(client, name, phases, timeout=60):
    end = time.monotonic() + timeout
    r = None
    while time.monotonic() < end:
        try:
            r = client.get(name)
        except airlock.AirlockError:    # not made yet
            r = None
        if r is not None and r.phase in phases:
            return r
        time.sleep(0.2)
    raise AssertionError("%s not in %s after %d s: %s" % (name, phases, timeout, r))


def test_readme_example(cluster, namespace, tmp_path, monkeypatch):
    """The README's three lines, with kubectl's defaults: $KUBECONFIG, its
    context's namespace."""
    with open(cluster["KUBECONFIG_ADMIN"]) as f:
        kc = yaml.safe_load(f)
    for ctx in kc["contexts"]:
        ctx["context"]["namespace"] = namespace
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kc))
    monkeypatch.setenv("KUBECONFIG", str(path))

    c = airlock.Client()
    r = c.run("print(6*7)")
    assert c.namespace == namespace
    assert (r.stdout, r.stderr, r.exit_code) == ("42\n", "", 0)
    assert (r.phase, r.reason, r.message) == ("Succeeded", "Completed", "exit code 0")
    assert r.start_mode == "Cold"
    assert r.name.startswith("run-") and r.ok
    assert 0 < r.duration_ms < 10000


def test_arguments(client):
    """stdin, files (str and bytes), env, args and the runtime, each seen by
    the program byte for byte."""
    r = client.run('read -r line; echo "$line|$GREETING|$1|$2"; cat data.csv; cat sub/b.bin\n'
                   'echo oops >&2; exit 7\n', runtime="bash",
                   stdin="from stdin\n", env={"GREETING": "hi there"},
                   args=["one", "two words"],
                   files={"data.csv": "a,b\n1,2\n", "sub/b.bin": "caf\u00e9\n".encode()})
    assert r.stdout == "from stdin|hi there|one|two words\na,b\n1,2\ncaf\u00e9\n"
    assert r.stderr == "oops\n"
    assert (r.phase, r.reason, r.exit_code) == ("Failed", "Error", 7)


def test_resources_and_name(client):
    name = "sdk-res-" + os.urandom(3).hex()
    r = client.run("print('ok')", memory="128Mi", cpu="250m", timeout=30, name=name)
    assert (r.name, r.stdout, r.exit_code) == (name, "ok\n", 0)
    obj = client._get(name)
    assert obj["spec"]["resources"] == {"memory": "128Mi", "cpu": "250m"}
    assert obj["spec"]["timeoutSeconds"] == 30


def test_non_zero_exit_is_a_result(client):
    r = client.run("import sys\nprint('partial')\nsys.exit(3)\n")
    assert (r.phase, r.reason, r.exit_code, r.stdout) == ("Failed", "Error", 3, "partial\n")
    assert not r.ok


def test_timeout(client):
    r = client.run("import time\nprint('start', flush=True)\nwhile True: time.sleep(0.1)\n",
                   timeout=1)
    assert (r.phase, r.reason, r.exit_code, r.stdout) == \
        ("TimedOut", "DeadlineExceeded", 137, "start\n")
    assert 1000 <= r.duration_ms < 1500


def test_callbacks(client):
    out, err = [], []
    r = client.run("import sys\nprint('a')\nprint('b', file=sys.stderr)\nprint('c')\n",
                   on_stdout=out.append, on_stderr=err.append)
    assert "".join(out) == "a\nc\n" == r.stdout
    assert "".join(err) == "b\n" == r.stderr


def test_rejected_by_the_api_server(client):
    with pytest.raises(airlock.RejectedError) as e:
        client.run("print(1)", timeout=0)
    assert e.value.field == "spec.timeoutSeconds"
    assert "timeoutSeconds" in str(e.value)
    with pytest.raises(airlock.RejectedError) as e:
        client.run("print(1)", env={"1BAD": "x"})
    assert e.value.field == "spec.env[0].name"
    with pytest.raises(airlock.RejectedError) as e:
        client.run("print(1)", files={"../up": "x"})
    assert e.value.field == "spec.files[0].path"


def test_rejected_before_sending(client):
    with pytest.raises(airlock.RejectedError) as e:
        client.run("print(1)", files={"x.bin": b"\xff\xfe"})
    assert e.value.field == "spec.files[x.bin].content"
    with pytest.raises(airlock.RejectedError) as e:
        client.run("print(1)", args="not a list")
    assert e.value.field == "spec.args"
    with pytest.raises(airlock.RejectedError) as e:
        client.run("print(1)", timeout="10")
    assert e.value.field == "spec.timeoutSeconds"


def test_rejected_by_the_controller(client):
    with pytest.raises(airlock.RejectedError) as e:
        client.run("print(1)", runtime="cobol")
    assert e.value.field == "spec.runtime"
    assert (e.value.result.phase, e.value.result.reason) == ("Failed", "Rejected")


def test_other_errors(cluster, namespace):
    """Not allowed (another namespace): AirlockError, not RejectedError."""
    c = airlock.Client(namespace="kube-system", kubeconfig=cluster["KUBECONFIG_RESTRICTED"])
    with pytest.raises(airlock.AirlockError) as e:
        c.run("print(1)")
    assert not isinstance(e.value, airlock.RejectedError)
    assert "HTTP 403" in str(e.value)
    with pytest.raises(airlock.AirlockError) as e:
        airlock.Client(kubeconfig="/nonexistent/kubeconfig")
    assert "kubeconfig" in str(e.value)


def test_create_waits_for_an_uncounted_quota(cluster, namespace, client):
    """A namespace's stored-executions quota that the quota controller has
    not counted yet (its first moments) refuses every create with 403
    "status unknown for quota"; the SDK tries the same create again, up to
    10 s, instead of failing the call. Here the quota is made uncounted and
    kept so, with this namespace's controller and the quota controller
    stopped, until the create has been refused for a while."""
    from conftest import kubectl

    assert client.run("print(1)").ok     # the namespace's quotas are made
    ctl = int(subprocess.check_output(
        ["pgrep", "-f", "airlock-controller .*--namespace %s " % namespace]).split()[0])
    with open(os.path.join(os.path.dirname(os.environ.get("AIRLOCK_CLUSTER_ENV") or os.path.join(
            os.path.dirname(__file__), "..", "..", ".cluster", "env")),
            "kube-controller-manager.pid")) as f:
        kcm = int(f.read())
    got = {}

    def create():
        try:
            got["name"] = client.create("print('counted')")
        except Exception as e:      # noqa: BLE001 - the test reports it
            got["error"] = e

    t = threading.Thread(target=create)
    os.kill(ctl, signal.SIGSTOP)
    os.kill(kcm, signal.SIGSTOP)
    try:
        kubectl(cluster, "-n", namespace, "patch", "resourcequota", "airlock-stored",
                "--subresource=status", "--type=merge", "-p",
                '{"status":{"used":{"count/codeexecutions.airlock.dev":null}}}')
        t.start()
        t.join(2)
        assert t.is_alive(), "the create ended while the quota was uncounted: %s" % got
    finally:
        os.kill(kcm, signal.SIGCONT)
        os.kill(ctl, signal.SIGCONT)
    t.join(15)
    assert "error" not in got, got
    r = client.wait(got["name"], timeout=60)
    assert (r.stdout, r.exit_code) == ("counted\n", 0)


def test_tenant(cluster, namespace):
    """A user who may only touch CodeExecutions in this namespace."""
    c = airlock.Client(namespace=namespace, kubeconfig=cluster["KUBECONFIG_RESTRICTED"])
    r = c.run("print('tenant')")
    assert (r.stdout, r.exit_code) == ("tenant\n", 0)


def test_cancel_on_interrupt(client):
    name = "sdk-int-" + os.urandom(3).hex()

    main = threading.main_thread().ident

    def interrupt():
        # As a terminal's Ctrl-C: SIGINT to the main thread, blocked
        # reading the watch.
        wait_phase(client, name, ("Running",))
        signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=interrupt)
    t.start()
    with pytest.raises(KeyboardInterrupt):
        client.run("import time\nwhile True: time.sleep(0.1)\n", timeout=60, name=name)
    t.join()
    r = client.get(name)
    assert (r.phase, r.reason) == ("Cancelled", "Cancelled")


def test_async(cluster, namespace):
    async def main():
        ac = airlock.AsyncClient(namespace=namespace, kubeconfig=cluster["KUBECONFIG_ADMIN"])
        out = []
        a, b = await asyncio.gather(ac.run("print('a')"),
                                    ac.run("echo b; exit 4", runtime="bash",
                                           on_stdout=out.append))
        assert (a.stdout, a.exit_code) == ("a\n", 0)
        assert (b.stdout, b.exit_code, "".join(out)) == ("b\n", 4, "b\n")
        return ac

    asyncio.run(main())


def test_async_cancel(cluster, namespace):
    name = "sdk-acan-" + os.urandom(3).hex()

    async def main():
        ac = airlock.AsyncClient(namespace=namespace, kubeconfig=cluster["KUBECONFIG_ADMIN"])
        task = asyncio.ensure_future(
            ac.run("import time\nwhile True: time.sleep(0.1)\n", timeout=60, name=name))
        while True:
            await asyncio.sleep(0.2)
            try:
                if (await ac.get(name)).phase == "Running":
                    break
            except airlock.AirlockError:
                pass
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return ac

    ac = asyncio.run(main())
    r = wait_phase(ac.sync, name, ("Cancelled",))
    assert r.reason == "Cancelled"


def test_async_cancel_in_create(cluster, namespace):
    """Cancelled before its create returned: the create finishes, and
    what it made is cancelled, not left running."""
    name = "sdk-acc-" + os.urandom(3).hex()

    async def main():
        ac = airlock.AsyncClient(namespace=namespace, kubeconfig=cluster["KUBECONFIG_ADMIN"])
        task = asyncio.ensure_future(
            ac.run("import time\nwhile True: time.sleep(0.1)\n", timeout=60, name=name))
        await asyncio.sleep(0)      # the create is on its way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return ac

    ac = asyncio.run(main())
    r = wait_phase(ac.sync, name, ("Cancelled",))
    assert r.reason == "Cancelled"


def test_bad_timeouts(client):
    for t in (float("nan"), float("inf"), True):
        with pytest.raises(airlock.RejectedError) as e:
            client.run("print(1)", timeout=t)
        assert e.value.field == "spec.timeoutSeconds"


def test_generated_names(client):
    r = client.run("print(1)")
    assert len(r.name) == 9 and r.name.startswith("run-")
    assert set(r.name[4:]) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_live_callbacks(client):
    """With a callback, the output while the program runs (the status
    shows it: spec.output.stream), each stream once and in order."""
    got = []
    r = client.run("import sys, time\nprint('a', flush=True)\n"
                   "print('x', file=sys.stderr, flush=True)\ntime.sleep(4)\nprint('b')\n",
                   on_stdout=lambda s: got.append((time.monotonic(), s)))
    end = time.monotonic()
    assert [s for _, s in got][0] == "a\n"
    assert "".join(s for _, s in got) == "a\nb\n" == r.stdout
    assert end - got[0][0] >= 2.5, "'a' came %.2f s before the end" % (end - got[0][0])
    assert client._get(r.name)["spec"]["output"] == {"stream": True, "maxBytes": 65536}
    r = client.run("print(1)")
    assert "stream" not in client._get(r.name)["spec"]["output"]


def test_artifacts(cluster, namespace):
    """Files out: r.artifacts lists what the program left in /airlock/out/,
    and read() gives each file's bytes, checked against its sha256, as the
    tenant (who may read CodeExecutionArtifacts in its namespace)."""
    import hashlib

    c = airlock.Client(namespace=namespace, kubeconfig=cluster["KUBECONFIG_RESTRICTED"])
    r = c.run("import os\nos.makedirs('/airlock/out/d', exist_ok=True)\n"
              "open('/airlock/out/d/b.bin', 'wb').write(bytes(range(256)))\n"
              "open('/airlock/out/a.txt', 'w').write('hello\\n')\nprint('ok')\n")
    assert (r.phase, r.stdout) == ("Succeeded", "ok\n")
    assert [(a.path, a.size, a.content_type) for a in r.artifacts] == [
        ("a.txt", 6, "text/plain"), ("d/b.bin", 256, "application/octet-stream")]
    assert r.artifacts[0].read() == b"hello\n"
    assert r.artifacts[1].read() == bytes(range(256))
    assert r.artifacts[1].sha256 == hashlib.sha256(bytes(range(256))).hexdigest()
    # The same through get(), later; none for a program that wrote none.
    assert [a.read() for a in c.get(r.name).artifacts] == [b"hello\n", bytes(range(256))]
    assert c.run("print(1)").artifacts == []
