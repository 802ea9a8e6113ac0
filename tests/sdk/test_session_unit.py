"""Sessions in the SDK and airlock.e2b without a cluster: the pure parts
(a traceback taken apart, an Execution assembled from a step's status,
the files' step code run for real with python3 in a temporary
directory), and Client.session / airlock.e2b.Sandbox end to end against
sessionfake.FakeSessions, an API server that runs each step in a python3
kernel of its own."""
import asyncio
import base64
import hashlib
import json
import os
import subprocess
import sys
import traceback

import pytest

import airlock
from airlock import _session, e2b
from airlock._client import Result

from sessionfake import FakeSessions

# --- tracebacks -------------------------------------------------------------


def tb_text(fn):
    """The traceback text fn's exception prints (Python's own format)."""
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 - the test formats it
        return "".join(traceback.TracebackException(type(e), e, e.__traceback__).format())
    raise AssertionError("no exception")


def test_split_simple():
    tb = ('Traceback (most recent call last):\n'
          '  File "<step 2>", line 1, in <module>\n'
          '    1/0\n'
          '    ~^~\n'
          'ZeroDivisionError: division by zero\n')
    assert _session.split_traceback("before\n" + tb) == (
        "before\n", "ZeroDivisionError", "division by zero", tb)
    assert _session.split_traceback(tb) == ("", "ZeroDivisionError", "division by zero", tb)


def test_split_chained_and_dotted():
    def chained():
        try:
            json.loads("{")
        except ValueError as e:
            raise KeyError("k") from e
    tb = tb_text(chained)
    assert tb.count("Traceback (most recent call last):") == 2
    assert "direct cause" in tb
    assert _session.split_traceback("out\n" + tb) == ("out\n", "KeyError", "'k'", tb)

    def during():
        try:
            1 / 0
        except ZeroDivisionError:
            raise json.JSONDecodeError("bad", "doc", 0)
    tb = tb_text(during)
    assert "During handling" in tb
    assert tb.splitlines()[-1] == "json.decoder.JSONDecodeError: bad: line 1 column 1 (char 0)"
    assert _session.split_traceback(tb) == (
        "", "JSONDecodeError", "bad: line 1 column 1 (char 0)", tb)


def test_split_value_forms():
    def multi():
        raise ValueError("line one\nline two")
    tb = tb_text(multi)
    assert _session.split_traceback(tb)[1:3] == ("ValueError", "line one\nline two")

    def bare():
        raise StopIteration
    assert _session.split_traceback(tb_text(bare))[1:3] == ("StopIteration", "")

    # A SyntaxError as the kernel prints it: no frames, no header.
    try:
        compile("x = (", "<step 1>", "exec")
    except SyntaxError as e:
        syn = "".join(traceback.TracebackException(type(e), e, None).format())
    assert syn.startswith('  File "<step 1>", line 1')
    assert _session.split_traceback(syn) == ("", "SyntaxError", "'(' was never closed", syn)


def test_split_not_a_traceback():
    assert _session.split_traceback("") is None
    assert _session.split_traceback("warning: x\n") is None
    assert _session.split_traceback("say Traceback (most recent call last):\nx\n") is None
    # A header, then nothing that names an exception.
    assert _session.split_traceback("Traceback (most recent call last):\n  File x\n") is None


def test_split_takes_the_last():
    """A traceback the code printed itself (traceback.print_exc()) stays
    in stderr; the one that ended the step is the error."""
    def first():
        raise OSError("handled")
    def last():
        raise RuntimeError("fatal")
    a, b = tb_text(first), tb_text(last)
    assert _session.split_traceback("x\n" + a + "y\n" + b) == (
        "x\n" + a + "y\n", "RuntimeError", "fatal", b)


# --- Execution from a step's status -----------------------------------------

PNG1, PNG2, PNG10 = b"\x89PNG one", b"\x89PNG two", b"\x89PNG ten"


def step_result(status, files=()):
    files = dict(files)
    st = dict(status)
    st["artifacts"] = [{"path": p, "size": len(b), "sha256": hashlib.sha256(b).hexdigest(),
                        "contentType": "image/png"} for p, b in files.items()]

    def load():
        return {"files": [{"path": p, "content": base64.b64encode(b).decode()}
                          for p, b in files.items()]}
    return Result.from_object({"metadata": {"name": "run-x"}, "status": st}, load)


def test_execution_assembled():
    r = step_result(
        {"phase": "Succeeded", "reason": "Completed", "exitCode": 0, "stdout": "a\nb\npart",
         "stderr": "warn\n", "value": "2"},
        [("figure-10.png", PNG10), ("figure-2.png", PNG2), ("figure-1.png", PNG1),
         ("data.csv", b"1,2\n")])
    assert r.value == "2"
    ex = e2b.build_execution(r, 3)
    assert [(x.text, x.is_main_result, x.png) for x in ex.results] == [
        ("2", True, None),
        ("<Figure>", False, base64.b64encode(PNG1).decode()),
        ("<Figure>", False, base64.b64encode(PNG2).decode()),
        ("<Figure>", False, base64.b64encode(PNG10).decode())]
    assert ex.text == "2" and ex.error is None and ex.execution_count == 3
    assert (ex.logs.stdout, ex.logs.stderr) == (["a\n", "b\n", "part"], ["warn\n"])
    assert ex.results[1].formats() == ["text", "png"]
    assert all(getattr(ex.results[0], f) is None for f in
               ("html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json",
                "javascript", "data", "chart", "extra"))
    assert repr(ex) == ("Execution(Results: [Result(2), Result(<Figure>), Result(<Figure>), "
                        "Result(<Figure>)], Logs: Logs(stdout: ['a\\n', 'b\\n', 'part'], "
                        "stderr: ['warn\\n']), Error: None)")


def test_execution_no_value_and_error():
    tb = ('Traceback (most recent call last):\n  File "<step 1>", line 2, in <module>\n'
          'ZeroDivisionError: division by zero\n')
    r = step_result({"phase": "Failed", "reason": "Error", "exitCode": 1,
                        "stdout": "", "stderr": "before\n" + tb})
    assert r.value is None
    ex = e2b.build_execution(r)
    assert ex.text is None and ex.results == []
    assert ex.logs.stderr == ["before\n"]
    assert (ex.error.name, ex.error.value, ex.error.traceback) == (
        "ZeroDivisionError", "division by zero", tb)
    assert json.loads(ex.error.to_json()) == {"name": "ZeroDivisionError",
                                              "value": "division by zero", "traceback": tb}
    assert repr(ex) == ("Execution(Results: [], Logs: Logs(stdout: [], stderr: ['before\\n']), "
                        "Error: ExecutionError(name='ZeroDivisionError', value='division by "
                        "zero', traceback=%r))" % tb)


def test_execution_other_failures():
    r = step_result({"phase": "Failed", "reason": "OOMKilled", "exitCode": 137,
                        "message": "out of memory (limit 1Gi)", "stderr": "x\n"})
    ex = e2b.build_execution(r)
    assert (ex.error.name, ex.error.value, ex.error.traceback) == (
        "OOMKilled", "out of memory (limit 1Gi)", "")
    assert ex.logs.stderr == ["x\n"]
    # sys.exit(3): Error, but no traceback: named by the reason.
    r = step_result({"phase": "Failed", "reason": "Error", "exitCode": 3,
                        "message": "exit code 3; the kernel restarted", "stderr": ""})
    assert (e2b.build_execution(r).error.name, e2b.build_execution(r).error.value) == (
        "Error", "exit code 3; the kernel restarted")
    # A one-shot execution's result has no value either.
    assert Result.from_object({"metadata": {"name": "n"}, "status": {}}).value is None


def test_result_repr():
    assert repr(e2b.Result(text="x")) == str(e2b.Result(text="x")) == "Result(x)"
    assert repr(e2b.Result(png="AAAA")) == "Result(Formats: png)"
    assert e2b.Result(text="t", extra={"k": 1}).formats() == ["text", "k"]


def test_stderr_relay():
    got = []
    relay = e2b._StderrRelay(lambda m: got.append((str(m), m.error)))
    for c in ["wa", "rn\nTrace", "back (most recent call last):\n  File", ' "<step 1>"\nK',
              "eyError: 'k'\n"]:
        relay.feed(c)
    assert got == [("warn\n", True)]
    relay.finish("warn\n")
    assert got == [("warn\n", True)]
    # A traceback the step printed and carried on from is let through at
    # the end; a SyntaxError's lines are held from the start.
    got.clear()
    relay = e2b._StderrRelay(lambda m: got.append(str(m)))
    relay.feed("Traceback (most recent call last):\n  x\nOSError: a\nafter\n")
    assert got == []
    relay.finish("Traceback (most recent call last):\n  x\nOSError: a\nafter\n")
    assert got == ["Traceback (most recent call last):\n", "  x\n", "OSError: a\n", "after\n"]
    got.clear()
    relay = e2b._StderrRelay(lambda m: got.append(str(m)))
    relay.feed('  File "<step 1>", line 1\n')
    relay.finish("")
    assert got == []


# --- the files' steps, run for real -------------------------------------------


def run_steps(codes, cwd, out):
    """Run each step's code as the kernel would (one namespace for all),
    in a python3 of its own: (stdout of each, the namespace's names after)."""
    prog = ("import json, os, sys, io, contextlib\nns = {}\nouts = []\n"
            "for code in json.load(sys.stdin):\n"
            "    buf = io.StringIO()\n"
            "    with contextlib.redirect_stdout(buf):\n"
            "        exec(code, ns)\n"
            "    outs.append(buf.getvalue())\n"
            "print(json.dumps([outs, sorted(k for k in ns if k != '__builtins__')]))\n")
    p = subprocess.run([sys.executable, "-c", prog], input=json.dumps(codes), cwd=cwd,
                       capture_output=True, text=True,
                       env=dict(os.environ, AIRLOCK_OUT_DIR=str(out)))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_files_steps_round_trip(tmp_path):
    wd, out = tmp_path / "wd", tmp_path / "out"
    wd.mkdir()
    data = bytes(range(256)) * 1000            # 256000 bytes: three steps
    steps = _session.write_steps("sub/dir/f.bin", data)
    assert len(steps) == 3
    assert all(len(s.encode()) < 262144 for s in steps)
    outs, names = run_steps(steps, wd, out)
    assert names == []                         # nothing left in the session's globals
    assert outs == [str(wd / "sub/dir/f.bin") + "\n"] * 3
    assert (wd / "sub/dir/f.bin").read_bytes() == data

    # Absolute, a name to sanitise, empty data.
    target = tmp_path / "abs dir" / ".caf\u00e9 x.txt"
    outs, _ = run_steps(_session.write_steps(str(target), b""), wd, out)
    assert target.read_bytes() == b""
    run_steps(_session.write_steps(str(target), "h\u00e9\n".encode()), wd, out)
    code, name = _session.read_step(str(target))
    assert name == "_caf__x.txt"
    outs, names = run_steps([code], wd, out)
    assert (outs, names) == (["4\n"], [])
    assert (out / name).read_bytes() == "h\u00e9\n".encode()

    code, name = _session.read_step("sub/dir/f.bin")
    assert name == "f.bin"
    assert run_steps([code], wd, out)[0] == ["256000\n"]
    assert (out / "f.bin").read_bytes() == data

    outs, names = run_steps([_session.list_step("sub")], wd, out)
    assert names == []
    assert json.loads(outs[0]) == [{"name": "dir", "path": str(wd / "sub/dir"),
                                    "type": "dir", "size": (wd / "sub/dir").stat().st_size}]
    outs, _ = run_steps([_session.list_step(str(wd / "sub/dir"))], wd, out)
    assert json.loads(outs[0]) == [{"name": "f.bin", "path": str(wd / "sub/dir/f.bin"),
                                    "type": "file", "size": 256000}]


def test_session_spec():
    assert _session.session_spec("python-data", {"memory": "1Gi"}, 600, 3600.5,
                                 {"a.csv": b"1,2\n"}) == {
        "runtime": "python-data", "resources": {"memory": "1Gi"}, "idleTimeoutSeconds": 600,
        "maxLifetimeSeconds": 3601, "files": [{"path": "a.csv", "content": "1,2\n"}]}
    assert _session.session_spec() == {"runtime": "python"}
    for kwargs, fld in [({"idle_timeout": "10"}, "spec.idleTimeoutSeconds"),
                        ({"max_lifetime": float("inf")}, "spec.maxLifetimeSeconds"),
                        ({"resources": {"gpu": 1}}, "spec.resources"),
                        ({"runtime": 3}, "spec.runtime"),
                        ({"files": {"x": b"\xff"}}, "spec.files[x].content")]:
        with pytest.raises(airlock.RejectedError) as e:
            _session.session_spec(**kwargs)
        assert e.value.field == fld, kwargs


# --- end to end on the fake API server -----------------------------------------


@pytest.fixture
def fake(tmp_path, request):
    f = FakeSessions(tmp_path, getattr(request, "param", None))
    yield f
    f.close()


def test_session_end_to_end(fake):
    c = fake.client()
    with c.session("python", idle_timeout=600) as s:
        assert s.name.startswith("session-") and len(s.name) == 13
        assert s.run("x = 40").value is None
        r = s.run("x += 1\nprint('hi')\nx")
        assert (r.ok, r.stdout, r.value, r.start_mode) == (True, "hi\n", "41", "Session")
        assert s.run("x + 1").value == "42"
        data = bytes(range(256))
        assert s.files.write("d/b.bin", data) == str(fake.tmp / s.name / "wd/d/b.bin")
        assert s.files.read("d/b.bin", format="bytes") == data
        s.files.write("t.txt", "caf\u00e9")
        assert s.files.read("t.txt") == "caf\u00e9"
        assert [(e.name, e.type, e.size) for e in s.files.list(".")] == [
            ("d", "dir", (fake.tmp / s.name / "wd/d").stat().st_size),
            ("t.txt", "file", 5)]
        with pytest.raises(airlock.SessionFileNotFoundError) as e:
            s.files.read("nope.txt")
        assert str(e.value) == ("files.read: 'nope.txt': no such file or directory in "
                                "session %s" % s.name)
        with pytest.raises(airlock.AirlockError) as e:
            s.files.read("d")
        assert str(e.value) == "files.read: 'd': IsADirectoryError: [Errno 21] Is a directory: 'd'"
        st = s.status()
        assert (st.phase, st.reason, st.executions) == ("Ready", None, 10)
        name = s.name
    # Every step named the session and its runtime; the session was
    # created once, closed by a patch, not deleted.
    steps = [b["spec"] for m, _, b in fake.requests("codeexecutions", "POST")]
    assert len(steps) == 10
    assert all((sp["session"], sp["runtime"]) == (name, "python") for sp in steps)
    assert [b["spec"] for _, _, b in fake.requests("codesessions", "POST")] == [
        {"runtime": "python", "idleTimeoutSeconds": 600}]
    assert [(m, b) for m, _, b in fake.requests("codesessions")
            if m not in ("GET",)][1:] == [("PATCH", {"spec": {"close": True}})]
    assert s.closed
    with pytest.raises(airlock.SessionEndedError) as e:
        s.run("x")
    assert (str(e.value), e.value.reason) == ("session %s is closed" % name, "Closed")
    s.close()                                   # again: nothing sent
    assert len(fake.requests("codesessions", "PATCH")) == 1


def test_step_of_an_ended_session(fake):
    c = fake.client()
    s = c.session("python")
    fake.objs[("codesessions", s.name)]["status"] = {
        "phase": "Ended", "reason": "IdleTimeout", "message": "no step for 600 s"}
    with pytest.raises(airlock.SessionEndedError) as e:
        s.run("1")
    assert str(e.value) == "session %s has ended (IdleTimeout): no step for 600 s" % s.name
    assert e.value.reason == "IdleTimeout"
    assert isinstance(e.value.__cause__, airlock.RejectedError)
    assert s.closed


@pytest.mark.parametrize("fake", [{"phase": "Ended", "reason": "Rejected",
                                   "message": "spec.runtime: sessions are not offered for "
                                              "runtime node"}], indirect=True)
def test_session_rejected(fake):
    with pytest.raises(airlock.RejectedError) as e:
        fake.client().session("node", name="mine")
    assert str(e.value) == ("session mine was rejected: spec.runtime: sessions are not "
                            "offered for runtime node")
    assert e.value.field == "spec.runtime"
    assert fake.requests("codesessions", "PATCH") == []     # ended: nothing to close


@pytest.mark.parametrize("fake", [{"phase": "Pending"}], indirect=True)
def test_session_not_ready(fake):
    with pytest.raises(airlock.AirlockError) as e:
        fake.client().session("python", name="slow", ready_timeout=0.5)
    assert str(e.value) == "session slow was not Ready within 0.5 s (phase Pending)"
    assert [(m, b) for m, _, b in fake.requests("codesessions", "PATCH")] == [
        ("PATCH", {"spec": {"close": True}})]


def test_async_session(fake):
    async def main():
        ac = airlock.AsyncClient(api_client=fake.client().api_client, namespace="ns1")
        out = []
        async with ac.session("python") as s:
            await s.run("y = 'a'")
            r = await s.run("import sys\nprint(y * 3)\nlen(y)", on_stdout=out.append)
            await s.files.write("f", b"\x00\x01")
            got = await s.files.read("f", format="bytes")
            st = await s.status()
        return s, r, out, got, st
    async def not_open():
        s = airlock.AsyncClient(api_client=fake.client().api_client, namespace="ns1").session()
        with pytest.raises(airlock.AirlockError) as e:
            await s.run("1")
        assert str(e.value) == ("the session is not open yet: await client.session(...) or "
                                "use async with")
        s = await s
        assert (await s.run("1")).value == "1"
        await s.close()
        return s
    assert asyncio.run(not_open()).sync.closed
    s, r, out, got, st = asyncio.run(main())
    assert (r.stdout, r.value, "".join(out)) == ("aaa\n", "1", "aaa\n")
    assert got == b"\x00\x01"
    assert (st.phase, st.executions) == ("Ready", 4)
    assert s.sync.closed


def test_e2b_readme_and_errors(fake, monkeypatch):
    with e2b.Sandbox.create(client=fake.client(), envs={"WHO": "e2b"}) as sandbox:
        assert sandbox.sandbox_id.startswith("session-")
        sandbox.run_code("x = 1")
        ex = sandbox.run_code("x+=1; x")
        assert (ex.text, ex.execution_count) == ("2", 2)
        ex = sandbox.run_code("import os, sys\nprint(os.environ['WHO'])\n"
                              "print('careful', file=sys.stderr)\n1/0\n",
                              envs={"MORE": "1"})
        assert ex.error.name == "ZeroDivisionError"
        assert ex.error.value == "division by zero"
        assert ex.error.traceback.startswith("Traceback (most recent call last):\n")
        assert ex.error.traceback.endswith("ZeroDivisionError: division by zero\n")
        assert (ex.logs.stdout, ex.logs.stderr, ex.text) == (["e2b\n"], ["careful\n"], None)
        steps = [b["spec"] for _, _, b in fake.requests("codeexecutions", "POST")]
        assert steps[-1]["env"] == [{"name": "WHO", "value": "e2b"},
                                    {"name": "MORE", "value": "1"}]
        assert steps[-1]["timeoutSeconds"] == 300 and steps[-1]["runtime"] == "python-data"

        # Callbacks: each chunk, then each result, then the error.
        seen = []
        ex = sandbox.run_code(
            "import os, sys\nprint('o')\nsys.stderr.write('e\\n')\n"
            "open(os.path.join(os.environ['AIRLOCK_OUT_DIR'], 'figure-1.png'), 'wb')"
            ".write(b'\\x89PNG')\n'v'\n",
            on_stdout=lambda m: seen.append(("out", str(m), m.error)),
            on_stderr=lambda m: seen.append(("err", str(m), m.error)),
            on_result=lambda r: seen.append(("result", repr(r))),
            on_error=lambda e: seen.append(("error", e.name)))
        assert seen == [("out", "o\n", False), ("err", "e\n", True),
                        ("result", "Result('v')"), ("result", "Result(<Figure>)")]
        assert base64.b64decode(ex.results[1].png) == b"\x89PNG"
        seen.clear()
        sandbox.run_code("raise KeyError('k')", on_error=lambda e: seen.append(e.name),
                         on_stderr=lambda m: seen.append(str(m)))
        assert seen == ["KeyError"]

        with pytest.raises(e2b.TimeoutException) as e:
            sandbox.run_code("import time\nz = 5\nwhile True: time.sleep(0.05)\n", timeout=1)
        assert "ran past its timeout of 1 s" in str(e.value)
        assert sandbox.run_code("z").text == "5"            # the state is kept

        with pytest.raises(e2b.InvalidArgumentException) as e:
            sandbox.run_code("1", language="js")
        assert str(e.value) == ("run_code: language 'js' is not offered by airlock.e2b: "
                                "python only")
        with pytest.raises(e2b.InvalidArgumentException) as e:
            sandbox.run_code("1", language="python", context=object())
        assert "either language or context" in str(e.value)
        assert sandbox.run_code("'py'", language="python").text == "'py'"

        info = sandbox.files.write("a/b.txt", b"bytes \xff")
        assert (info.name, info.path, info.type) == (
            "b.txt", str(fake.tmp / sandbox.sandbox_id / "wd/a/b.txt"), e2b.FileType.FILE)
        assert sandbox.files.read("a/b.txt", format="bytes") == bytearray(b"bytes \xff")
        assert isinstance(sandbox.files.read("a/b.txt", format="bytes"), bytearray)
        import io
        sandbox.files.write("c.txt", io.BytesIO(b"from a file\n"))
        assert sandbox.files.read("c.txt") == "from a file\n"
        assert [(x.name, x.type) for x in sandbox.files.list(".")] == [
            ("a", "dir"), ("c.txt", "file")]
        assert sandbox.files.list(".")[0].type == "dir"
        with pytest.raises(e2b.NotFoundException):
            sandbox.files.read("missing")
        assert sandbox.is_running()
        assert sandbox.kill() is True
        assert sandbox.kill() is False
        assert not sandbox.is_running()
    assert len(fake.requests("codesessions", "PATCH")) == 1


def test_no_session_crd(fake):
    """An API server without the CodeSession CRD: the error says which."""
    fake.answer = lambda method, path, body: fake.status(
        404, "the server could not find the requested resource")
    with pytest.raises(airlock.AirlockError) as e:
        fake.client().session("python")
    assert str(e.value) == ("create: the server could not find the requested resource "
                            "(is Airlock's CodeSession CRD installed?) (HTTP 404)")


# --- the same against the sandbox's own kernel (images/runner/kernel.py) -------

KERNEL_HARNESS = r'''
import importlib.util, io, json, sys
spec = importlib.util.spec_from_file_location("airlock_kernel", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
k = m.Kernel()
sys.displayhook = k.displayhook
real = sys.stdout, sys.stderr
res = []
for src in json.load(sys.stdin):
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    try:
        kind, code = k.run(1, src)
    finally:
        sys.stdout, sys.stderr = real
    v = k.value_text()
    res.append([kind, out.getvalue(), err.getvalue(), v.decode() if v is not None else None,
                sorted(n for n in k.main.__dict__ if not n.startswith("__"))])
print(json.dumps(res))
'''


def kernel_steps(srcs, cwd, out):
    """Each src run as a step by kernel.py's Kernel, in one python3: for
    each, [kind, stdout, stderr, value, the session's global names]."""
    from conftest import TOP

    p = subprocess.run([sys.executable, "-c", KERNEL_HARNESS,
                        os.path.join(TOP, "images", "runner", "kernel.py")],
                       input=json.dumps(srcs), cwd=cwd, capture_output=True, text=True,
                       env=dict(os.environ, AIRLOCK_OUT_DIR=str(out)))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_kernel_tracebacks_and_values(tmp_path):
    """What split_traceback and build_execution are given is what the
    kernel prints: its tracebacks (its own frames left out), its values."""
    got = kernel_steps(["x = 1", "x += 1; x",
                        "def f():\n    return 1/0\nprint('p')\nf()",
                        "x = (",
                        "try:\n    1/0\nexcept ZeroDivisionError as e:\n"
                        "    raise KeyError(1) from e"], tmp_path, tmp_path / "out")
    assert [g[0] for g in got] == ["ok", "ok", "error", "error", "error"]
    assert [g[3] for g in got] == [None, "2", None, None, None]
    tb = got[2][2]
    assert tb == ('Traceback (most recent call last):\n  File "<step 3>", line 4, in <module>\n'
                  '    f()\n  File "<step 3>", line 2, in f\n    return 1/0\n'
                  '           ~^~\nZeroDivisionError: division by zero\n')
    assert _session.split_traceback(tb) == ("", "ZeroDivisionError", "division by zero", tb)
    assert _session.split_traceback(got[3][2]) == (
        "", "SyntaxError", "'(' was never closed", got[3][2])
    assert _session.split_traceback(got[4][2])[:3] == ("", "KeyError", "1")
    assert "direct cause" in got[4][2]


def test_kernel_files_steps(tmp_path):
    """The files' steps in the kernel's own namespace: they work, and the
    session's globals are as the user left them."""
    out = tmp_path / "out"
    data = bytes(range(256)) * 400              # 102400 bytes: two steps
    code, name = _session.read_step("d/x.bin")
    got = kernel_steps(["f = 'mine'"] + _session.write_steps("d/x.bin", data) +
                       [code, _session.list_step("d"), "f"], tmp_path, out)
    assert [g[0] for g in got] == ["ok"] * 6
    assert [g[4] for g in got] == [["f"]] * 6
    assert [g[1] for g in got[1:3]] == [str(tmp_path / "d/x.bin") + "\n"] * 2
    assert [g[3] for g in got] == [None] * 5 + ["'mine'"]
    assert (got[3][1], (out / name).read_bytes()) == ("102400\n", data)
    assert json.loads(got[4][1]) == [{"name": "x.bin", "path": str(tmp_path / "d/x.bin"),
                                      "type": "file", "size": 102400}]
