"""A drop-in for ``e2b_code_interpreter``'s synchronous surface on
Airlock's sessions: change the import, keep the code.

    from airlock.e2b import Sandbox
    with Sandbox.create() as sandbox:
        sandbox.run_code("x = 1")
        print(sandbox.run_code("x+=1; x").text)     # 2

A Sandbox is a python-data CodeSession (docs/sessions.md) in the
namespace ``airlock.Client()`` takes by default; each ``run_code`` is a
step. What E2B's kernel hands over as messages is rebuilt here from the
step's status: its value is the main result, each figure it saved
(``figure-N.png`` in its files out) a display result, and an exception's
traceback, which the kernel prints last on stderr, becomes ``error`` and
leaves ``logs.stderr``, as in E2B. What is not here: ``commands``,
contexts, languages other than Python, ``Result.chart`` (always None).
"""

import base64
import json
import re
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import IO, Any, Callable, Dict, List, Optional, Union

from ._client import Client, Result as _StepResult
from ._session import WRITE_MAX, Session, split_traceback
from .errors import AirlockError, RejectedError, SessionEndedError, SessionFileNotFoundError

__all__ = ["Sandbox", "Execution", "Result", "Logs", "ExecutionError", "OutputMessage",
           "EntryInfo", "WriteInfo", "FileType", "SandboxException", "TimeoutException",
           "NotFoundException", "InvalidArgumentException"]

RUNTIME = "python-data"
# E2B's default for run_code's timeout (seconds); 0 there means none:
# here, the execution's own default (spec.timeoutSeconds).
DEFAULT_TIMEOUT = 300
FIGURE_RE = re.compile(r"^figure-(\d+)\.png$")


class SandboxException(Exception):
    """What went wrong that is not the code's own error (E2B's base)."""


class TimeoutException(SandboxException):
    """A step ran past its timeout, or the sandbox's lifetime ran out."""


class NotFoundException(SandboxException):
    """A file the sandbox does not have."""


class InvalidArgumentException(SandboxException):
    """An argument Airlock (or E2B) does not take."""


@dataclass
class OutputMessage:
    """A chunk of a stream, as an ``on_stdout``/``on_stderr`` callback
    gets it; ``str()`` is the text."""

    line: str
    timestamp: int          # ns since the epoch, when it was seen here
    error: bool = False

    def __str__(self):
        return self.line


@dataclass
class ExecutionError:
    """The exception that ended a step: its class's name, its value (the
    text after "Name: "), and the whole traceback's text."""

    name: str
    value: str
    traceback: str

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "value": self.value,
                           "traceback": self.traceback})


FORMATS = ("text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json",
           "javascript", "data", "chart")


@dataclass(repr=False)
class Result:
    """A result of a step, as E2B's: the main result (the last
    expression's text/plain) or a figure (``png``, base64, with text
    ``<Figure>``). Formats Airlock does not make are None."""

    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    svg: Optional[str] = None
    png: Optional[str] = None
    jpeg: Optional[str] = None
    pdf: Optional[str] = None
    latex: Optional[str] = None
    json: Optional[dict] = None
    javascript: Optional[str] = None
    data: Optional[dict] = None
    chart: Optional[Any] = None
    is_main_result: bool = False
    extra: Optional[dict] = None

    def __getitem__(self, item):
        return getattr(self, item)

    def formats(self) -> List[str]:
        return [f for f in FORMATS if getattr(self, f)] + list(self.extra or {})

    def __repr__(self):
        if self.text:
            return "Result(%s)" % self.text
        return "Result(Formats: %s)" % ", ".join(self.formats())

    __str__ = __repr__

    def _repr_png_(self):
        return self.png


@dataclass(repr=False)
class Logs:
    """What a step printed: each stream as a list of chunks (a line each)."""

    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)

    def __repr__(self):
        return "Logs(stdout: %s, stderr: %s)" % (self.stdout, self.stderr)

    def to_json(self) -> str:
        return json.dumps({"stdout": self.stdout, "stderr": self.stderr})


@dataclass(repr=False)
class Execution:
    """One ``run_code``: its results, logs, error (None when it raised
    none) and its number in the sandbox."""

    results: List[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: Optional[ExecutionError] = None
    execution_count: Optional[int] = None

    def __repr__(self):
        return "Execution(Results: %s, Logs: %s, Error: %s)" % (self.results, self.logs,
                                                                 self.error)

    @property
    def text(self) -> Optional[str]:
        """The main result's text: the last expression's, or None."""
        return next((r.text for r in self.results if r.is_main_result), None)

    def to_json(self) -> str:
        return json.dumps({
            "results": [dict({f: r[f] for f in r.formats()}, text=r.text)
                        for r in self.results],
            "logs": self.logs.to_json(),
            "error": self.error.to_json() if self.error else None})


class FileType(str, Enum):
    FILE = "file"
    DIR = "dir"


@dataclass
class EntryInfo:
    name: str
    type: FileType
    path: str
    size: int = 0


@dataclass
class WriteInfo:
    name: str
    type: Optional[FileType]
    path: str


def chunks(text: str) -> List[str]:
    """A stream as E2B's list of chunks: one per line, each keeping its
    newline (a last line without one is a chunk too)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def step_error(r: _StepResult):
    """(the stderr to show, the ExecutionError or None) of a step ended
    other than TimedOut. A Python exception (reason Error) is taken from
    the traceback ending stderr, which then leaves it; any other failure
    (a non-zero sys.exit, OOMKilled, Cancelled, a kernel that died) is
    named by its reason, its message the value."""
    if r.ok:
        return r.stderr, None
    split = split_traceback(r.stderr) if r.reason == "Error" else None
    if split is not None:
        before, name, value, tb = split
        return before, ExecutionError(name, value, tb)
    return r.stderr, ExecutionError(r.reason or r.phase, r.message or "", "")


def figures(r: _StepResult) -> List[Result]:
    """A display result per figure the step saved, in the order saved."""
    figs = sorted(((int(m.group(1)), a) for a in r.artifacts
                   for m in [FIGURE_RE.match(a.path)] if m), key=lambda t: t[0])
    return [Result(text="<Figure>", png=base64.b64encode(a.read()).decode("ascii"))
            for _, a in figs]


def build_execution(r: _StepResult, count: Optional[int] = None) -> Execution:
    """The Execution E2B would give for a step that ended as r: the main
    result from its value first, then its figures."""
    stderr, error = step_error(r)
    results = []
    if r.value is not None:
        results.append(Result(text=r.value, is_main_result=True))
    results += figures(r)
    return Execution(results=results, logs=Logs(chunks(r.stdout), chunks(stderr)),
                     error=error, execution_count=count)


class _StderrRelay:
    """Streams stderr to a callback, line by line, holding back from a
    traceback's header on: a step's uncaught exception is its error, not
    its stderr, and which traceback is the last is known only at the end
    (one the code printed itself is let through then)."""

    def __init__(self, cb):
        self.cb, self.seen, self.sent = cb, "", 0

    def feed(self, chunk: str):
        self.seen += chunk
        if self.sent == 0 and self.seen.startswith('  File "'):
            return              # a SyntaxError's: it has no header
        upto = self.seen.rfind("\n") + 1
        at = self.sent
        while True:
            at = self.seen.find("Traceback (most recent call last):\n", at)
            if at < 0 or at == 0 or self.seen[at - 1] == "\n":
                break
            at += 1
        if at >= 0:
            upto = min(upto, at)
        self._send(self.seen[self.sent:upto])

    def finish(self, stderr: str):
        """stderr: what the Execution shows; the rest of it not sent yet."""
        self._send(stderr[self.sent:])

    def _send(self, text):
        for line in chunks(text):
            self.cb(OutputMessage(line, time.time_ns(), True))
            self.sent += len(line)


def _sandbox_error(e: AirlockError) -> SandboxException:
    if isinstance(e, SessionEndedError) and e.reason in ("IdleTimeout", "Expired"):
        return TimeoutException(str(e))
    if isinstance(e, SessionFileNotFoundError):
        return NotFoundException(str(e))
    if isinstance(e, RejectedError):
        return InvalidArgumentException(str(e))
    return SandboxException(str(e))


class Filesystem:
    """``sandbox.files``: each call a step of the session's."""

    def __init__(self, session: Session):
        self._files = session.files

    def read(self, path: str, format: str = "text", **ignored):
        """str with format "text" (the default, as E2B's), bytearray with
        "bytes", an iterator of bytes with "stream"."""
        if format not in ("text", "bytes", "stream"):
            raise InvalidArgumentException("files.read: format: must be 'text', 'bytes' or "
                                           "'stream', not %r" % (format,))
        try:
            data = self._files.read(path, "text" if format == "text" else "bytes")
        except AirlockError as e:
            raise _sandbox_error(e) from e
        if format == "bytes":
            return bytearray(data)
        if format == "stream":
            return iter([data])
        return data

    def write(self, path: str, data: Union[str, bytes, IO], **ignored) -> WriteInfo:
        if hasattr(data, "read"):
            data = data.read(WRITE_MAX + 1)     # over: refused by Session.files.write
        try:
            full = self._files.write(path, data)
        except AirlockError as e:
            raise _sandbox_error(e) from e
        return WriteInfo(name=full.rsplit("/", 1)[-1], type=FileType.FILE, path=full)

    def list(self, path: str, **ignored) -> List[EntryInfo]:
        try:
            es = self._files.list(path)
        except AirlockError as e:
            raise _sandbox_error(e) from e
        return [EntryInfo(e.name, FileType(e.type), e.path, e.size) for e in es]


def _env(envs, where: str) -> Dict[str, str]:
    if envs is None:
        return {}
    if not isinstance(envs, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in envs.items()):
        raise InvalidArgumentException("%s: must be a dict of str to str" % where)
    return dict(envs)


class Sandbox:
    """A python-data session standing in for E2B's sandbox. ``timeout``
    (seconds) is its lifetime (``maxLifetimeSeconds``); ``envs`` every
    step's environment. ``template``, ``api_key`` and E2B's other options
    are taken and not used. ``client``: an ``airlock.Client`` to use in
    place of ``Client()``'s defaults (kubeconfig, namespace)."""

    def __init__(self, template: Optional[str] = None, timeout: Optional[int] = None,
                 envs: Optional[Dict[str, str]] = None, api_key: Optional[str] = None, *,
                 client: Optional[Client] = None, **ignored):
        self._envs = _env(envs, "envs")
        self._count = 0
        try:
            self._client = client if client is not None else Client()
            self._session = self._client.session(RUNTIME, max_lifetime=timeout)
        except AirlockError as e:
            raise _sandbox_error(e) from e
        self.files = Filesystem(self._session)

    @classmethod
    def create(cls, template: Optional[str] = None, timeout: Optional[int] = None,
               envs: Optional[Dict[str, str]] = None, api_key: Optional[str] = None,
               **ignored) -> "Sandbox":
        return cls(template, timeout, envs, api_key, **ignored)

    @property
    def sandbox_id(self) -> str:
        return self._session.name

    def run_code(self, code: str, language: Optional[str] = None,
                 context: Optional[Any] = None,
                 on_stdout: Optional[Callable[[OutputMessage], Any]] = None,
                 on_stderr: Optional[Callable[[OutputMessage], Any]] = None,
                 on_result: Optional[Callable[[Result], Any]] = None,
                 on_error: Optional[Callable[[ExecutionError], Any]] = None,
                 envs: Optional[Dict[str, str]] = None, timeout: Optional[float] = None,
                 request_timeout: Optional[float] = None) -> Execution:
        """Run code as the session's next step. Its exception is
        ``Execution.error``, not raised; its timeout (300 s unless given;
        0: the execution's default) raises TimeoutException, the state
        kept."""
        if language is not None and context is not None:
            raise InvalidArgumentException("run_code: you can provide either language or "
                                           "context, not both")
        if context is not None:
            raise InvalidArgumentException("run_code: context: contexts are not offered by "
                                           "airlock.e2b (one interpreter per sandbox)")
        if language is not None and language != "python":
            raise InvalidArgumentException("run_code: language %r is not offered by "
                                           "airlock.e2b: python only" % (language,))
        env = dict(self._envs, **_env(envs, "envs"))
        if timeout is None:
            timeout = DEFAULT_TIMEOUT
        out = None if on_stdout is None else \
            (lambda c: on_stdout(OutputMessage(c, time.time_ns(), False)))
        relay = None if on_stderr is None else _StderrRelay(on_stderr)
        try:
            r = self._session.run(code, env=env or None, timeout=timeout or None,
                                  on_stdout=out, on_stderr=relay and relay.feed)
        except AirlockError as e:
            raise _sandbox_error(e) from e
        if r.phase == "TimedOut":
            raise TimeoutException("run_code: step %s ran past its timeout of %s s: %s" % (
                r.name, timeout or "the default", r.message))
        self._count += 1
        try:
            ex = build_execution(r, self._count)
        except AirlockError as e:
            raise _sandbox_error(e) from e
        if relay is not None:
            relay.finish("".join(ex.logs.stderr))
        for res in ex.results:
            if on_result is not None:
                on_result(res)
        if ex.error is not None and on_error is not None:
            on_error(ex.error)
        return ex

    def is_running(self) -> bool:
        try:
            return self._session.status().phase == "Ready"
        except AirlockError as e:
            raise _sandbox_error(e) from e

    def kill(self) -> bool:
        """Close the session; False when it was closed already."""
        if self._session.closed:
            return False
        try:
            self._session.close()
        except AirlockError as e:
            raise _sandbox_error(e) from e
        return True

    close = kill

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type, exc, tb):
        self.kill()

    def __repr__(self):
        return "Sandbox(sandbox_id=%r)" % self.sandbox_id
