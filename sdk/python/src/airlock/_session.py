"""Sessions (docs/sessions.md): a CodeSession keeps one sandbox and one
interpreter across steps; each step is a CodeExecution naming it in
``spec.session``. ``Session.files`` moves files in and out with steps of
its own, so it needs nothing of the API beyond what a step has: write is
a step that decodes base64 into the path, read a step that copies the
file to /airlock/out, whence it comes back as an artifact."""

import base64
import json
import math
import posixpath
import re
from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Tuple, Union

from kubernetes.client.rest import ApiException

from ._client import (FIELD_RE, GROUP, REQUEST_TIMEOUT, VERSION, Result, _api_error,
                      files_spec)
from .errors import (AirlockError, RejectedError, SessionEndedError,
                     SessionFileNotFoundError)

SESSION_PLURAL = "codesessions"
SESSION_PREFIX = "session-"
# spec.source is at most 256 KiB; a write's step carries its bytes as
# base64 (4/3) beside a few hundred bytes of code: 96 KiB a step keeps
# well under it.
WRITE_CHUNK = 96 * 1024
# What one files.write sends at most: each 96 KiB is a step of its own,
# and a session's sandbox is no place for bulk data (the working
# directory counts in its memory).
WRITE_MAX = 16 * 1024 * 1024
# A read comes back as an artifact, held to the operator's budget
# (config.artifacts.maxBytes): said in the error when the file is left out.
ARTIFACTS_BUDGET_DEFAULT = "1 MiB"

# The steps' bodies. Each runs in a dict of its own (exec(BODY, {...})),
# so it binds nothing in the session's globals, and the step's one
# statement is a call whose value is None: no status.value.
_WRITE = '''import base64, os
p = os.path.abspath(path)
d = os.path.dirname(p)
if d:
    os.makedirs(d, exist_ok=True)
with open(p, mode) as f:
    f.write(base64.b64decode(b64))
print(p)
'''
_READ = '''import os, shutil
if os.path.isdir(path):
    raise IsADirectoryError(21, "Is a directory", path)
out = os.environ.get("AIRLOCK_OUT_DIR", "/airlock/out")
os.makedirs(out, exist_ok=True)
shutil.copyfile(path, os.path.join(out, name))
print(os.path.getsize(path))
'''
_LIST = '''import json, os
top = os.path.abspath(path)
es = []
for e in sorted(os.scandir(top), key=lambda e: e.name):
    try:
        d = e.is_dir()
    except OSError:
        d = False
    try:
        size = e.stat().st_size
    except OSError:
        size = 0
    es.append({"name": e.name, "path": os.path.join(top, e.name),
               "type": "dir" if d else "file", "size": size})
print(json.dumps(es))
'''


def _step(body: str, what: str, **names) -> str:
    """One statement running body with names bound, in a namespace of its
    own: the session's globals are left as they were."""
    g = ", ".join("%r: %r" % kv for kv in sorted(names.items()))
    return "exec(compile(%r, %r, 'exec'), {'__name__': 'airlock_files', %s})\n" % (
        body, "<airlock %s>" % what, g)


def write_steps(path: str, data: bytes) -> List[str]:
    """The steps that write data to path (parents made; relative to the
    working directory): the first truncates, the rest append, each at
    most WRITE_CHUNK bytes of data. Each prints the absolute path."""
    chunks = [data[i:i + WRITE_CHUNK] for i in range(0, len(data), WRITE_CHUNK)] or [b""]
    return [_step(_WRITE, "files.write", path=path, mode="wb" if i == 0 else "ab",
                  b64=base64.b64encode(c).decode("ascii"))
            for i, c in enumerate(chunks)]


def artifact_name(path: str) -> str:
    """The name under /airlock/out that a read of path copies it to: its
    base name in the characters the artifacts budget takes (printable
    ASCII, no leading '.', which the CLI's --out refuses)."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", posixpath.basename(path))
    if base.startswith("."):
        base = "_" + base[1:]
    return base


def read_step(path: str) -> Tuple[str, str]:
    """The step that copies path to /airlock/out and prints its size; and
    the artifact's name it will come back as."""
    name = artifact_name(path)
    return _step(_READ, "files.read", path=path, name=name), name


def list_step(path: str) -> str:
    """The step that prints path's entries as a JSON list."""
    return _step(_LIST, "files.list", path=path)


# A chained exception's parts are joined by one of these (traceback.py).
_CHAIN = ("\nThe above exception was the direct cause of the following exception:\n\n",
          "\nDuring handling of the above exception, another exception occurred:\n\n")
_HEAD = "Traceback (most recent call last):\n"


def split_traceback(stderr: str) -> Optional[Tuple[str, str, str, str]]:
    """The traceback a failed step's stderr ends with, taken apart:
    (the stderr before it, the exception's name, its value, the whole
    traceback text), or None when stderr does not end with one.

    The kernel prints an uncaught exception's traceback last (a chained
    one whole; a SyntaxError as its "File ..." lines alone, the step
    having printed nothing before it). The exception line is the first
    after the last block's indented frame lines; its value may run on over
    more lines. The name is the class's own (``JSONDecodeError``, not
    ``json.decoder.JSONDecodeError``), as IPython's ``ename``."""
    at = stderr.rfind(_HEAD)
    if at > 0 and stderr[at - 1] != "\n":
        at = -1
    if at < 0:
        # A SyntaxError: no header, only the parser's place and the line.
        if not stderr.startswith('  File "'):
            return None
        at = 0
    else:
        # Back over the chain: each part before the last one's header.
        while True:
            for sep in _CHAIN:
                if stderr.endswith(sep, 0, at):
                    prev = stderr.rfind(_HEAD, 0, at - len(sep))
                    if prev >= 0 and (prev == 0 or stderr[prev - 1] == "\n"):
                        at = prev
                        break
            else:
                break
    tb = stderr[at:]
    last = tb.rfind(_HEAD)
    lines = tb[max(last, 0):].split("\n")
    i = 1 if last >= 0 else 0
    while i < len(lines) and (lines[i].startswith(" ") or lines[i] == ""):
        i += 1
    if i >= len(lines):
        return None
    exc = "\n".join(lines[i:]).rstrip("\n")
    head, sep, value = exc.partition(": ")
    if not sep and exc.endswith(":"):
        head = exc[:-1]
    if not re.fullmatch(r"[A-Za-z_][\w.]*", head):
        return None
    return stderr[:at], head.rsplit(".", 1)[-1], value, tb


@dataclass
class SessionStatus:
    """A session's status, as the controller last wrote it."""

    name: str
    phase: str
    reason: Optional[str]
    message: Optional[str]
    executions: int
    restarts: int
    pod_name: Optional[str]
    node_name: Optional[str]
    start_mode: Optional[str]
    status: dict = field(repr=False)

    @classmethod
    def from_object(cls, obj: dict) -> "SessionStatus":
        st = obj.get("status") or {}
        return cls(name=obj["metadata"]["name"], phase=st.get("phase") or "Pending",
                   reason=st.get("reason") or None, message=st.get("message"),
                   executions=int(st.get("executions") or 0),
                   restarts=int(st.get("restarts") or 0), pod_name=st.get("podName"),
                   node_name=st.get("nodeName"), start_mode=st.get("startMode"), status=st)


def _seconds(v, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RejectedError("%s: must be a number of seconds" % where, where)
    return int(math.ceil(v))


def session_spec(runtime="python", resources=None, idle_timeout=None, max_lifetime=None,
                 files=None) -> dict:
    """The CodeSession spec for these arguments. Types are checked here,
    naming the field; ranges are the API server's to refuse."""
    if not isinstance(runtime, str):
        raise RejectedError("spec.runtime: must be a string", "spec.runtime")
    spec = {"runtime": runtime}
    if resources:
        if not isinstance(resources, Mapping) or set(resources) - {"cpu", "memory"}:
            raise RejectedError("spec.resources: must be a mapping with cpu and/or memory",
                                "spec.resources")
        spec["resources"] = dict(resources)
    if idle_timeout is not None:
        spec["idleTimeoutSeconds"] = _seconds(idle_timeout, "spec.idleTimeoutSeconds")
    if max_lifetime is not None:
        spec["maxLifetimeSeconds"] = _seconds(max_lifetime, "spec.maxLifetimeSeconds")
    if files:
        spec["files"] = files_spec(files)
    return spec


def ended_error(st: SessionStatus) -> AirlockError:
    """The error for a session found Ended: RejectedError (naming the
    field the controller named) when it was refused, else
    SessionEndedError with its reason."""
    msg = st.message or ""
    if st.reason == "Rejected":
        m = FIELD_RE.match(msg)
        return RejectedError("session %s was rejected: %s" % (st.name, msg),
                             m.group(1) if m else None)
    return SessionEndedError("session %s has ended (%s)%s" % (
        st.name, st.reason or "no reason given", ": " + msg if msg else ""), st.name, st.reason)


class Session:
    """An open CodeSession: ``run`` a step, ``files``, ``status``,
    ``close``. Made by ``Client.session``; a context manager that closes
    it on exit. Steps run one at a time, in the order they are sent."""

    def __init__(self, client, name: str, runtime: str):
        self.client = client
        self.name = name
        self.runtime = runtime
        self.closed = False
        self.files = SessionFiles(self)

    @classmethod
    def open(cls, client, runtime="python", *, resources=None, idle_timeout=None,
             max_lifetime=None, files=None, name=None, ready_timeout=60) -> "Session":
        """Create the CodeSession (with Client.create's retries) and wait
        for it to be Ready. Ended first: ``ended_error``. Not Ready in
        ready_timeout seconds, or interrupted: closed, and the error
        raised names it."""
        spec = session_spec(runtime, resources, idle_timeout, max_lifetime, files)
        n = client._create_object(SESSION_PLURAL, "CodeSession", spec, name, SESSION_PREFIX)
        s = cls(client, n, runtime)
        try:
            s._wait_ready(ready_timeout)
        except BaseException:
            s._close_quietly()
            raise
        return s

    def _wait_ready(self, timeout):
        last = []
        obj = self.client._watch_until(
            SESSION_PLURAL, self.name,
            lambda o: (o.get("status") or {}).get("phase") in ("Ready", "Ended"), timeout,
            "session %s was deleted before it was Ready" % self.name, last)
        if obj is None:
            st = SessionStatus.from_object(last[0])
            raise AirlockError("session %s was not Ready within %g s (phase %s%s)" % (
                self.name, timeout, st.phase, ": " + st.message if st.message else ""))
        st = SessionStatus.from_object(obj)
        if st.phase == "Ended":
            self.closed = True
            raise ended_error(st)

    def status(self) -> SessionStatus:
        return SessionStatus.from_object(self.client._get(self.name, SESSION_PLURAL))

    def _check_open(self):
        if self.closed:
            raise SessionEndedError("session %s is closed" % self.name, self.name, "Closed")

    def _step_rejected(self, e: RejectedError) -> AirlockError:
        """A step refused for its spec.session: the session's own end when
        it has ended (an idle timeout, its lifetime), else e."""
        if e.field != "spec.session":
            return e
        try:
            st = self.status()
        except AirlockError:
            return e
        if st.phase != "Ended":
            return e
        self.closed = True
        return ended_error(st)

    def run(self, code: Union[str, bytes], **kwargs) -> Result:
        """Run code as the session's next step; keyword arguments as
        ``Client.run``'s. ``Result.value`` is its last expression's text."""
        self._check_open()
        try:
            return self.client.run(code, self.runtime, session=self.name, **kwargs)
        except RejectedError as e:
            err = self._step_rejected(e)
            if err is e:
                raise
            raise err from e

    def close(self) -> None:
        """End the session (``spec.close``: its pod is deleted at once; a
        running step ends Cancelled). Kept as a record until its
        ``ttlSecondsAfterFinished``. Closing again, or a session gone
        already, is not an error."""
        if self.closed:
            return
        try:
            self.client._api.patch_namespaced_custom_object(
                GROUP, VERSION, self.client.namespace, SESSION_PLURAL, self.name,
                {"spec": {"close": True}}, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as e:
            if e.status != 404:
                raise _api_error("close session %s" % self.name, e) from None
        self.closed = True

    def _close_quietly(self):
        try:
            self.close()
        except Exception:   # noqa: BLE001 - an error is being raised already
            pass

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self._close_quietly()   # the body's error is the one to see

    def __repr__(self):
        return "Session(name=%r, runtime=%r, closed=%r)" % (self.name, self.runtime,
                                                            self.closed)


@dataclass
class FileEntry:
    """An entry of a directory in the sandbox: type is "file" or "dir"."""

    name: str
    path: str
    type: str
    size: int


class SessionFiles:
    """Files in the session's sandbox, each call a step of its own (python
    sessions). Paths are the sandbox's: relative ones are relative to the
    working directory."""

    def __init__(self, session: Session):
        self.session = session

    def _python(self, what: str):
        if not self.session.runtime.startswith("python"):
            raise AirlockError("files.%s: session %s runs %s: its files are moved by python "
                               "steps, offered for python sessions only"
                               % (what, self.session.name, self.session.runtime))

    def _failed(self, what: str, path: str, r: Result) -> AirlockError:
        split = split_traceback(r.stderr)
        if r.ok:
            return AirlockError("files.%s: '%s': step %s printed what it should not: %r"
                                % (what, path, r.name, r.stdout[:200]))
        if split is None:
            return AirlockError("files.%s: '%s': step %s ended %s (%s): %s" % (
                what, path, r.name, r.phase, r.reason, r.message))
        name, value = split[1], split[2]
        if name == "FileNotFoundError":
            return SessionFileNotFoundError("files.%s: '%s': no such file or directory in "
                                            "session %s" % (what, path, self.session.name))
        return AirlockError("files.%s: '%s': %s: %s" % (what, path, name, value))

    def write(self, path: str, data: Union[str, bytes]) -> str:
        """Write data (str as UTF-8) to path, making its parent
        directories; the absolute path written."""
        self._python("write")
        if not isinstance(path, str) or not path:
            raise RejectedError("files.write: path: must be a non-empty string", "path")
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise RejectedError("files.write: data: must be str or bytes, not %s"
                                % type(data).__name__, "data")
        data = bytes(data)
        if len(data) > WRITE_MAX:
            raise RejectedError("files.write: data: %d bytes is over the %d a write takes"
                                % (len(data), WRITE_MAX), "data")
        out = ""
        for code in write_steps(path, data):
            r = self.session.run(code)
            if not r.ok:
                raise self._failed("write", path, r)
            out = r.stdout
        if not out.endswith("\n"):
            raise self._failed("write", path, r)
        return out[:-1]

    def read(self, path: str, format: str = "text") -> Union[str, bytes]:
        """path's content: str (UTF-8) with format "text", bytes with
        "bytes". SessionFileNotFoundError when there is no such file;
        AirlockError when it did not come back (over the operator's
        artifacts budget)."""
        self._python("read")
        if format not in ("text", "bytes"):
            raise RejectedError("files.read: format: must be 'text' or 'bytes', not %r"
                                % (format,), "format")
        if not isinstance(path, str) or not path:
            raise RejectedError("files.read: path: must be a non-empty string", "path")
        code, name = read_step(path)
        if not name:
            raise RejectedError("files.read: path: '%s' names a directory" % path, "path")
        r = self.session.run(code)
        if not r.ok:
            raise self._failed("read", path, r)
        art = next((a for a in r.artifacts if a.path == name), None)
        if art is None:
            raise AirlockError(
                "files.read: '%s' (%s bytes) did not come back: files come back as files out, "
                "at most the operator's artifacts budget (config.artifacts.maxBytes, %s by "
                "default): %s" % (path, r.stdout.strip() or "?", ARTIFACTS_BUDGET_DEFAULT,
                                  r.message))
        data = art.read()
        if format == "bytes":
            return data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise AirlockError("files.read: '%s' is not UTF-8 text (%s): read it with "
                               "format='bytes'" % (path, e)) from None

    def list(self, path: str = ".") -> List[FileEntry]:
        """The entries of directory path, by name."""
        self._python("list")
        r = self.session.run(list_step(path))
        if not r.ok:
            raise self._failed("list", path, r)
        if r.stdout_truncated:
            raise AirlockError("files.list: '%s': the listing is longer than a step's "
                               "output may be" % path)
        try:
            return [FileEntry(e["name"], e["path"], e["type"], int(e["size"]))
                    for e in json.loads(r.stdout)]
        except (ValueError, KeyError, TypeError):
            raise self._failed("list", path, r) from None
