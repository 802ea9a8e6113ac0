"""A stand-in API server for sessions, for tests that run without a
cluster (test_session_unit.py): it stores CodeSessions, CodeExecutions and
CodeExecutionArtifacts as the real one would, and plays the controller
and the sandbox too, just enough to drive the SDK end to end at the HTTP
level. A session is Ready on creation (or Ended, as a test asks); a step
(a CodeExecution naming it) is run at once in that session's kernel, a
python3 process of its own in a temporary working directory, which keeps
globals as kernel.py does and gives back the step's stdout, stderr, its
last expression's repr and the files it left in $AIRLOCK_OUT_DIR. A step
past its spec.timeoutSeconds gets SIGINT, as the agent sends it.

What this is not: the real controller's queueing, admission (CEL) or
the agent's budgets. Those are the real cluster's tests
(test_session.py)."""
import base64
import copy
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import kubernetes

import airlock

NS = "ns1"
BASE = "/apis/airlock.dev/v1alpha1/namespaces/%s/" % NS

# The kernel: one JSON line in per step ({"code", "env"}), one out.
KERNEL = r'''
import ast, io, json, os, shutil, sys, traceback, types
OUT = os.environ["AIRLOCK_OUT_DIR"]
main = types.ModuleType("__main__")
ns = main.__dict__
real = sys.stdout
count = 0
for line in sys.stdin:
    req = json.loads(line)
    count += 1
    name = "<step %d>" % count
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    saved = dict(os.environ)
    os.environ.update(req["env"])
    value, ok = None, True
    try:
        tree = ast.parse(req["code"], filename=name)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, name, "exec"), ns)
        if last is not None:
            v = eval(compile(last, name, "eval"), ns)
            value = None if v is None else repr(v)
    except BaseException as e:
        ok = False
        te = traceback.TracebackException(type(e), e, None if isinstance(e, SyntaxError)
                                          else e.__traceback__)
        te.stack = traceback.StackSummary.from_list(
            [f for f in te.stack if f.filename != __file__])
        err.write("".join(te.format()))
    finally:
        sys.stdout, sys.stderr = real, sys.__stderr__
        os.environ.clear()
        os.environ.update(saved)
    files = {}
    for top, _, names in os.walk(OUT):
        for n in names:
            p = os.path.join(top, n)
            with open(p, "rb") as f:
                files[os.path.relpath(p, OUT)] = f.read().hex()
    real.write(json.dumps({"ok": ok, "stdout": out.getvalue(), "stderr": err.getvalue(),
                           "value": value, "files": files}) + "\n")
    real.flush()
'''


class Kernel:
    def __init__(self, work):
        os.makedirs(os.path.join(work, "wd"))
        path = os.path.join(work, "kernel.py")
        with open(path, "w") as f:
            f.write(KERNEL)
        self.out_dir = os.path.join(work, "out")
        env = dict(os.environ, AIRLOCK_OUT_DIR=self.out_dir)
        self.p = subprocess.Popen([sys.executable, path], cwd=os.path.join(work, "wd"),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env)
        self.wd = os.path.join(work, "wd")

    def step(self, code, env, timeout):
        self.p.stdin.write(json.dumps({"code": code, "env": env}) + "\n")
        self.p.stdin.flush()
        got = {}
        t = threading.Thread(target=lambda: got.update(json.loads(self.p.stdout.readline())))
        t.start()
        t.join(timeout)
        timed_out = t.is_alive()
        if timed_out:
            self.p.send_signal(signal.SIGINT)
            t.join()
        return got, timed_out

    def close(self):
        self.p.stdin.close()
        self.p.wait(10)


class FakeSessions:
    """The API server, the controller and the sandbox, for sessions.

    ``session_status``: the status a new session gets (Ready by default;
    a dict to end it at once, or to leave it Pending)."""

    def __init__(self, tmp_path, session_status=None):
        self.objs = {}          # (plural, name) -> object
        self.reqs = []          # (method, path, body)
        self.kernels = {}
        self.tmp = tmp_path
        self.uid = 0
        self.session_status = session_status or {"phase": "Ready", "startMode": "Cold"}
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                if self.command == "GET" and "watch=true" in self.path:
                    # A watch that sees nothing for a while, then ends:
                    # the SDK gets the object again.
                    time.sleep(0.1)
                    code, out = 200, None
                else:
                    with fake.lock:
                        fake.reqs.append((self.command, self.path, body))
                        code, out = fake.answer(self.command, self.path, body)
                data = json.dumps(out).encode() if out is not None else b""
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = handle_one

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def client(self):
        cfg = kubernetes.client.Configuration()
        cfg.host = self.url
        return airlock.Client(NS, api_client=kubernetes.client.ApiClient(cfg), create_retry=0)

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
        for k in self.kernels.values():
            k.close()

    def requests(self, plural, method=None):
        """The bodies of requests to plural (the collection or an object)."""
        return [(m, p, b) for m, p, b in self.reqs
                if p.split("?")[0].startswith(BASE + plural) and (method is None or m == method)]

    @staticmethod
    def status(code, message):
        return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                      "code": code, "message": message}

    def answer(self, method, path, body):
        m = re.fullmatch(re.escape(BASE) + r"([a-z]+)(?:/([^/?]+))?(\?.*)?", path)
        if not m:
            return self.status(404, "no such path")
        plural, name, _ = m.groups()
        if method == "POST":
            name = body["metadata"]["name"]
            if (plural, name) in self.objs:
                return self.status(409, "%s %s already exists" % (plural, name))
            self.uid += 1
            obj = copy.deepcopy(body)
            obj["metadata"].update(uid="uid-%d" % self.uid, resourceVersion="1",
                                   namespace=NS)
            self.objs[(plural, name)] = obj
            if plural == "codesessions":
                obj["status"] = copy.deepcopy(self.session_status)
                if obj["status"]["phase"] == "Ready":
                    self.kernels[name] = Kernel(str(self.tmp / name))
            elif plural == "codeexecutions":
                self.run_step(obj)
            return 201, obj
        obj = self.objs.get((plural, name))
        if obj is None:
            return self.status(404, '%s "%s" not found' % (plural, name))
        if method == "PATCH":
            obj["spec"].update(body["spec"])
            if plural == "codesessions" and body["spec"].get("close"):
                obj["status"] = {"phase": "Ended", "reason": "Closed",
                                 "executions": obj["status"].get("executions", 0)}
        return 200, obj

    def run_step(self, cx):
        spec = cx["spec"]
        st = cx["status"] = {"startMode": "Session"}
        sess = self.objs.get(("codesessions", spec.get("session")))
        if sess is None or sess["status"]["phase"] != "Ready":
            st.update(phase="Failed", reason="Rejected",
                      message="spec.session: session %s has ended" % spec.get("session"))
            return
        env = {e["name"]: e["value"] for e in spec.get("env") or []}
        got, timed_out = self.kernels[spec["session"]].step(
            spec["source"], env, spec.get("timeoutSeconds") or 3600)
        sess["status"]["executions"] = sess["status"].get("executions", 0) + 1
        if timed_out:
            st.update(phase="TimedOut", reason="DeadlineExceeded", exitCode=124,
                      message="timed out after %ds; the state is kept" % spec["timeoutSeconds"])
        elif got["ok"]:
            st.update(phase="Succeeded", reason="Completed", exitCode=0, message="exit code 0")
        else:
            st.update(phase="Failed", reason="Error", exitCode=1, message="exit code 1")
        st.update(stdout=got["stdout"], stderr=got["stderr"])
        if got["value"] is not None:
            st["value"] = got["value"]
        files = {p: bytes.fromhex(h) for p, h in sorted(got["files"].items())}
        if files:
            st["artifacts"] = [{"path": p, "size": len(b),
                                "sha256": hashlib.sha256(b).hexdigest(),
                                "contentType": "application/octet-stream"}
                               for p, b in files.items()]
            self.objs[("codeexecutionartifacts", cx["metadata"]["name"])] = {
                "metadata": {"name": cx["metadata"]["name"],
                             "labels": {"airlock.dev/execution-uid": cx["metadata"]["uid"]}},
                "files": [{"path": p, "content": base64.b64encode(b).decode()}
                          for p, b in files.items()]}
