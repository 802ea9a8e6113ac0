"""Client.create through an API server that cannot take it yet: a scripted
HTTP server on 127.0.0.1 in place of the real one (what a real one cannot
be made to do on demand: 503, 429 with Retry-After, an answer lost after
the object was stored), and a closed port for a refused connection. No
cluster is needed: these run wherever the SDK is installed."""
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import kubernetes
import pytest

import airlock

CX_PATH = "/apis/airlock.dev/v1alpha1/namespaces/ns1/codeexecutions"
TOKEN = "airlock.dev/create-token"
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

# The 503 the chart's MutatingAdmissionPolicy answers right after install
# (k8s.io/apiserver admission/plugin/policy/mutating/dispatcher.go).
UNAVAILABLE_MSG = ("Resource kind airlock.dev/v1alpha1, Kind=CodeExecution not found. "
                   "There can be a delay between when CustomResourceDefinitions are "
                   "created and when they are available.")


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message}


UNAVAILABLE = (503, {}, status(503, "ServiceUnavailable", UNAVAILABLE_MSG))
TOO_MANY = (429, {"Retry-After": "1"}, status(429, "TooManyRequests", "too many requests"))
EXISTS = (409, {}, status(409, "AlreadyExists", 'codeexecutions.airlock.dev "x" already exists'))
NOT_FOUND = (404, {}, status(404, "NotFound", "the server could not find the requested resource"))
DROP = "drop"                               # close the connection, no answer


def echo(i, code=201):
    """Answer with the body request i sent: the object as stored."""
    return ("echo", i, code)


class FakeAPI:
    """Answers requests in order from a script; records each one."""

    def __init__(self, script):
        self.script, self.reqs, self.lock = list(script), [], threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                with fake.lock:
                    fake.reqs.append((self.command, self.path, body, time.monotonic()))
                    r = fake.script.pop(0) if fake.script else \
                        (599, {}, status(599, "Unscripted", "no answer scripted"))
                if r == DROP:
                    self.close_connection = True
                    return
                if r[0] == "echo":
                    code, hdrs, out = r[2], {}, fake.reqs[r[1]][2]
                else:
                    code, hdrs, out = r[0], r[1], json.dumps(r[2])
                data = out.encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in hdrs.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = handle_one

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()

    def sent(self, i):
        """The name and token the i-th request's body carries."""
        md = json.loads(self.reqs[i][2])["metadata"]
        assert "generateName" not in md
        return md["name"], md["annotations"][TOKEN]


def client(url, retry=30.0):
    cfg = kubernetes.client.Configuration()
    cfg.host = url
    return airlock.Client("ns1", api_client=kubernetes.client.ApiClient(cfg),
                          create_retry=retry)


def drawn(name):
    return len(name) == 9 and name.startswith("run-") and all(c in ALPHABET for c in name[4:])


@pytest.fixture
def fake(request):
    f = FakeAPI(request.param)
    yield f
    f.close()


@pytest.mark.parametrize("fake", [[UNAVAILABLE, TOO_MANY, echo(2)]], indirect=True)
def test_unavailable_then_taken(fake):
    """503, then 429 with Retry-After: 1 (waited out), then taken: one
    execution, the same name and token on every try."""
    name = client(fake.url).create("print(1)")
    assert [(m, p) for m, p, _, _ in fake.reqs] == [("POST", CX_PATH)] * 3
    first = fake.sent(0)
    assert first == fake.sent(1) == fake.sent(2)
    assert name == first[0] and drawn(name)
    assert len(first[1]) == 32 and all(c in "0123456789abcdef" for c in first[1])
    assert fake.reqs[2][3] - fake.reqs[1][3] >= 1.0


@pytest.mark.parametrize("fake", [[DROP, EXISTS, echo(0, 200)]], indirect=True)
def test_answer_lost(fake):
    """The first create is stored but its answer lost: the retry's 409
    names an object with our token, so it is ours. No third create."""
    name = client(fake.url).create("print(1)")
    assert [(m, p) for m, p, _, _ in fake.reqs] == [
        ("POST", CX_PATH), ("POST", CX_PATH), ("GET", CX_PATH + "/" + name)]
    assert fake.sent(0) == fake.sent(1)
    assert name == fake.sent(0)[0]


OTHER = (200, {}, {"metadata": {"name": "x", "annotations": {TOKEN: "0" * 32}}})


@pytest.mark.parametrize("fake", [[EXISTS, OTHER, echo(2)]], indirect=True)
def test_name_taken_drawn_again(fake):
    name = client(fake.url).create("print(1)")
    assert [m for m, _, _, _ in fake.reqs] == ["POST", "GET", "POST"]
    (n0, t0), (n2, t2) = fake.sent(0), fake.sent(2)
    assert name == n2 != n0 and drawn(n2) and t0 == t2


@pytest.mark.parametrize("fake", [[EXISTS, OTHER]], indirect=True)
def test_name_given_taken(fake):
    with pytest.raises(airlock.AirlockError) as e:
        client(fake.url).create("print(1)", name="mine")
    assert str(e.value) == 'create: codeexecutions.airlock.dev "x" already exists (HTTP 409)'
    assert [(m, p) for m, p, _, _ in fake.reqs] == [("POST", CX_PATH),
                                                      ("GET", CX_PATH + "/mine")]


@pytest.mark.parametrize("fake", [[UNAVAILABLE] * 40], indirect=True)
def test_deadline(fake):
    t0 = time.monotonic()
    with pytest.raises(airlock.AirlockError) as e:
        client(fake.url, retry=1.0).create("print(1)")
    took = time.monotonic() - t0
    tries = len(fake.reqs)
    assert str(e.value) == ("create: the API server refused it for 1 s (%d tries), last with "
                            "HTTP 503: %s" % (tries, UNAVAILABLE_MSG))
    assert tries >= 3 and 1.0 <= took < 2.5


@pytest.mark.parametrize("fake", [[NOT_FOUND]], indirect=True)
def test_not_found_is_not_retried(fake):
    with pytest.raises(airlock.AirlockError) as e:
        client(fake.url).create("print(1)")
    assert str(e.value) == ("create: the server could not find the requested resource "
                            "(is Airlock's CodeExecution CRD installed?) (HTTP 404)")
    assert len(fake.reqs) == 1


def test_connection_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t0 = time.monotonic()
    with pytest.raises(airlock.AirlockError) as e:
        client("http://127.0.0.1:%d" % port, retry=1.0).create("print(1)")
    took = time.monotonic() - t0
    msg = str(e.value)
    head = "create: no answer from the API server for 1 s ("
    assert msg.startswith(head), msg
    assert int(msg[len(head):].split(" ")[0]) >= 2
    assert "Connection refused" in msg
    assert 1.0 <= took < 2.5
    # create_retry=0: one try, the error as it came.
    with pytest.raises(airlock.AirlockError) as e:
        client("http://127.0.0.1:%d" % port, retry=0).create("print(1)")
    assert str(e.value).startswith("create: ") and "Connection refused" in str(e.value)
    assert "no answer from the API server" not in str(e.value)
