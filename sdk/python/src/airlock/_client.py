"""The synchronous client: a CodeExecution made with the official
``kubernetes`` client, its end awaited on a watch of that one object."""

import math
import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Union

import kubernetes
import urllib3
from kubernetes.client.rest import ApiException

from .errors import AirlockError, RejectedError

GROUP = "airlock.dev"
VERSION = "v1alpha1"
PLURAL = "codeexecutions"
TERMINAL = ("Succeeded", "Failed", "TimedOut", "Cancelled")
SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
# A controller's refusal names the field first: "spec.runtime: ...".
FIELD_RE = re.compile(r"^(spec(?:\.[A-Za-z0-9_-]+|\[[^\]]*\])+):")

Callback = Optional[Callable[[str], None]]
# A request's (connect, read) limits in seconds; a watch's read limit is
# its segment's length plus WATCH_SLACK.
REQUEST_TIMEOUT = (10, 60)
# How long a create refused "status unknown for quota" is tried again: a
# quota the quota controller has not counted yet refuses every create it
# covers, in a namespace's first moments.
QUOTA_UNCOUNTED_WAIT = 10.0
# How long a create the API server could not take is tried again (the
# CLI's --api-retry): no answer, 503, 429. See Client.create.
CREATE_RETRY = 30.0
RETRY_STATUS = (429, 503)
# A random token of the client's own on each object it creates: after a
# lost answer, the object under the name is known as its own by it.
TOKEN_ANNOTATION = "airlock.dev/create-token"
WATCH_SLACK = 15
NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"   # generateName's alphabet


def new_name(prefix="run-"):
    import secrets

    return prefix + "".join(secrets.choice(NAME_CHARS) for _ in range(5))


ARTIFACTS_PLURAL = "codeexecutionartifacts"


@dataclass
class Artifact:
    """A file the program left in /airlock/out/: its status entry; read()
    fetches the content (its CodeExecutionArtifacts, once per result) and
    checks it against the sha256 the status lists."""

    path: str
    size: int
    sha256: str
    content_type: str
    _load: Optional[Callable[[], dict]] = field(default=None, repr=False, compare=False)

    def read(self) -> bytes:
        import base64
        import hashlib

        if self._load is None:
            raise AirlockError("%s: no client to read it with" % self.path)
        for f in self._load().get("files") or []:
            if f.get("path") == self.path:
                data = base64.b64decode(f.get("content", ""))
                if hashlib.sha256(data).hexdigest() != self.sha256:
                    raise AirlockError("%s: its content does not have the sha256 "
                                       "the execution lists" % self.path)
                return data
        raise AirlockError("%s: not in the execution's files out" % self.path)


@dataclass
class Result:
    """How one execution ended, as its status says."""

    name: str
    phase: str
    reason: Optional[str]
    message: Optional[str]
    exit_code: Optional[int]
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    start_mode: Optional[str]
    duration_ms: Optional[int]
    status: dict = field(repr=False)
    artifacts: List[Artifact] = field(default_factory=list)
    # A session's step: the text/plain of its last expression (at most
    # 4 KiB), None when it had none; always None for a one-shot execution.
    value: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.phase == "Succeeded"

    @classmethod
    def from_object(cls, obj: dict, load: Optional[Callable[[], dict]] = None) -> "Result":
        st = obj.get("status") or {}
        arts = [Artifact(a.get("path", ""), a.get("size", 0), a.get("sha256", ""),
                         a.get("contentType", ""), load)
                for a in st.get("artifacts") or []]
        return cls(
            name=obj["metadata"]["name"],
            phase=st.get("phase", ""),
            reason=st.get("reason"),
            message=st.get("message"),
            exit_code=st.get("exitCode"),
            stdout=st.get("stdout", ""),
            stderr=st.get("stderr", ""),
            stdout_truncated=bool(st.get("stdoutTruncated", False)),
            stderr_truncated=bool(st.get("stderrTruncated", False)),
            start_mode=st.get("startMode"),
            duration_ms=st.get("durationMillis"),
            status=st,
            artifacts=arts,
            value=st.get("value"),
        )


def _text(value, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as e:
            raise RejectedError(
                "%s: must be UTF-8 text (the API carries strings): %s" % (where, e),
                where) from None
    raise RejectedError("%s: must be str or bytes, not %s" % (where, type(value).__name__),
                        where)


def files_spec(files) -> List[dict]:
    """spec.files (an execution's or a session's) from a mapping of
    relative path to str or UTF-8 bytes."""
    if not isinstance(files, Mapping):
        raise RejectedError("spec.files: must be a mapping of path to content", "spec.files")
    return [{"path": p, "content": _text(c, "spec.files[%s].content" % p)}
            for p, c in files.items()]


def build_spec(code, runtime="python", stdin=None, files=None, env=None, args=None,
               timeout=None, memory=None, cpu=None, stream=False, session=None) -> dict:
    """The CodeExecution spec for these arguments. Types are checked here,
    naming the field; ranges and sizes are the API server's to refuse."""
    spec = {"runtime": runtime, "source": _text(code, "spec.source")}
    if not isinstance(runtime, str):
        raise RejectedError("spec.runtime: must be a string", "spec.runtime")
    if stdin is not None:
        spec["stdin"] = _text(stdin, "spec.stdin")
    if files:
        spec["files"] = files_spec(files)
    if env:
        if not isinstance(env, Mapping):
            raise RejectedError("spec.env: must be a mapping of name to value", "spec.env")
        spec["env"] = [{"name": k, "value": _text(v, "spec.env[%s].value" % k)}
                       for k, v in env.items()]
    if args is not None:
        if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            raise RejectedError("spec.args: must be a list of strings", "spec.args")
        spec["args"] = [_text(a, "spec.args[%d]" % i) for i, a in enumerate(args)]
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
                not math.isfinite(timeout):
            raise RejectedError("spec.timeoutSeconds: must be a number of seconds",
                                "spec.timeoutSeconds")
        spec["timeoutSeconds"] = int(math.ceil(timeout))
    res = {}
    if memory is not None:
        res["memory"] = memory
    if cpu is not None:
        res["cpu"] = cpu
    if res:
        spec["resources"] = res
    if stream:
        spec["output"] = {"stream": True}
    if session is not None:
        if not isinstance(session, str):
            raise RejectedError("spec.session: must be a session's name", "spec.session")
        spec["session"] = session
    return spec


def _transient(e: Exception) -> bool:
    """Whether a request that got no answer may get one later: not a TLS
    or certificate failure, nor a host name that does not resolve."""
    reason = getattr(e, "reason", None) or e
    lasting = (urllib3.exceptions.SSLError,
               getattr(urllib3.exceptions, "NameResolutionError", ()),
               urllib3.exceptions.LocationParseError)
    return not isinstance(reason, lasting) and not isinstance(e, lasting)


def _retry_after(e: ApiException) -> Optional[float]:
    """The answer's Retry-After in seconds (delta-seconds only), or None."""
    try:
        v = (e.headers or {}).get("Retry-After")
        return max(0.0, float(int(v))) if v is not None else None
    except (TypeError, ValueError):
        return None


def _status_message(e: ApiException) -> str:
    import json

    try:
        return json.loads(e.body or "{}").get("message") or e.reason or str(e.status)
    except ValueError:
        return e.reason or str(e.status)


def _api_error(what: str, e: ApiException, kind: str = "CodeExecution") -> AirlockError:
    """An API refusal as the SDK's error: 400/422 name the field."""
    import json

    msg, fld = e.reason or str(e.status), None
    try:
        body = json.loads(e.body or "{}")
        msg = body.get("message") or msg
        causes = (body.get("details") or {}).get("causes") or []
        fld = next((c.get("field") for c in causes if c.get("field")), None)
    except ValueError:
        pass
    if e.status in (400, 422):
        return RejectedError("%s: %s" % (what, msg), fld)
    if e.status == 404 and "could not find the requested resource" in msg:
        msg += " (is Airlock's %s CRD installed?)" % kind
    return AirlockError("%s: %s (HTTP %s)" % (what, msg, e.status))


class _Emitter:
    """Hands each stream's bytes to its callback once, in order, as the
    status shows more of them."""

    def __init__(self, on_stdout: Callback, on_stderr: Callback):
        self.cbs = (("stdout", on_stdout), ("stderr", on_stderr))
        self.sent = {"stdout": 0, "stderr": 0}

    def feed(self, status: dict):
        for key, cb in self.cbs:
            text = status.get(key) or ""
            if cb is not None and len(text) > self.sent[key]:
                chunk, self.sent[key] = text[self.sent[key]:], len(text)
                cb(chunk)


class Client:
    """Runs code as CodeExecutions in one namespace.

    ``namespace``, ``kubeconfig`` and ``context`` default as kubectl's do:
    ``$KUBECONFIG`` or ``~/.kube/config`` and its current context and that
    context's namespace, else the pod's own service account in a cluster,
    else ``default``. ``api_client`` takes a ready ``kubernetes`` ApiClient.
    ``create_retry``: how many seconds a create the API server could not
    take (no answer, 503, 429) is tried again; 0 not at all.
    """

    def __init__(self, namespace: Optional[str] = None, kubeconfig: Optional[str] = None,
                 context: Optional[str] = None, *, api_client=None,
                 create_retry: float = CREATE_RETRY):
        ns = None
        self.create_retry = float(create_retry or 0)
        if api_client is None:
            cfg = kubernetes.client.Configuration()
            # $KUBECONFIG now (the kubernetes package reads it once, at
            # import), a list of files as kubectl takes it.
            if kubeconfig is None and os.environ.get("KUBECONFIG"):
                kubeconfig = os.environ["KUBECONFIG"]
            try:
                kubernetes.config.load_kube_config(config_file=kubeconfig, context=context,
                                                   client_configuration=cfg)
                _, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)
                if context is not None:
                    active = next(c for c in kubernetes.config.list_kube_config_contexts(
                        config_file=kubeconfig)[0] if c["name"] == context)
                ns = (active.get("context") or {}).get("namespace")
            except kubernetes.config.ConfigException as e:
                if kubeconfig is not None or context is not None:
                    raise AirlockError("kubeconfig: %s" % e) from None
                try:
                    kubernetes.config.load_incluster_config(client_configuration=cfg)
                    with open(SA_NAMESPACE) as f:
                        ns = f.read().strip()
                except (kubernetes.config.ConfigException, OSError) as e2:
                    raise AirlockError("no kubeconfig (%s) and not in a cluster (%s)"
                                       % (e, e2)) from None
            api_client = kubernetes.client.ApiClient(cfg)
        self.namespace = namespace or ns or "default"
        self.api_client = api_client
        self._api = kubernetes.client.CustomObjectsApi(api_client)

    # --- the object ------------------------------------------------------

    def create(self, code: Union[str, bytes], runtime: str = "python", *,
               stdin: Union[str, bytes, None] = None,
               files: Optional[Mapping[str, Union[str, bytes]]] = None,
               env: Optional[Mapping[str, str]] = None, args: Optional[List[str]] = None,
               timeout: Optional[float] = None, memory: Union[str, int, None] = None,
               cpu: Union[str, int, None] = None, name: Optional[str] = None,
               stream: bool = False, session: Optional[str] = None) -> str:
        """Make the CodeExecution (a step of ``session`` when named: see
        ``Client.session``); its name (``run-`` and five random
        characters when not given, as ``generateName`` would, but chosen
        here so that an interrupted create can still be cancelled).

        An API server that cannot take it yet is tried again, backing off
        (or after its Retry-After), for ``create_retry`` seconds: no answer
        (connection refused or reset, a timeout; not TLS or a host name
        that does not resolve), 503 (right after ``helm install`` the
        admission policy answers "Resource kind ... not found. There can
        be a delay ..." until the API server has the CRD's schema), 429.
        A 404 is not retried: the CRD is not installed. Never two objects:
        the name is fixed before the first try and the object carries a
        random token (``airlock.dev/create-token``), so a 409 for an
        object with our token is our own earlier try whose answer was lost.
        """
        spec = build_spec(code, runtime, stdin, files, env, args, timeout, memory, cpu,
                          stream, session)
        return self._create_object(PLURAL, "CodeExecution", spec, name, "run-")

    def _create_object(self, plural: str, kind: str, spec: dict, name: Optional[str],
                       prefix: str) -> str:
        """Create's retries and name (see ``create``) for an object of any
        of Airlock's kinds: a CodeExecution, a CodeSession. Its name."""
        import random
        import secrets

        token = secrets.token_hex(16)
        n = name or new_name(prefix)
        start = time.monotonic()
        until = start + max(0.0, self.create_retry or 0.0)
        uncounted_until = start + QUOTA_UNCOUNTED_WAIT
        tries, redraws, backoff, said = 0, 0, 0.25, None
        while True:
            body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": kind,
                    "metadata": {"name": n, "annotations": {TOKEN_ANNOTATION: token}},
                    "spec": spec}
            tries += 1
            wait = None
            try:
                self._api.create_namespaced_custom_object(GROUP, VERSION, self.namespace,
                                                          plural, body,
                                                          _request_timeout=REQUEST_TIMEOUT)
                return n
            except ApiException as e:
                if e.status == 409:
                    mine = self._ours(plural, n, token)
                    if mine is True:
                        return n    # an earlier try landed; its answer was lost
                    if mine is False and name is None and redraws < 3:
                        redraws += 1
                        n = new_name(prefix)
                        continue    # another's name: draw again
                    if mine is False:
                        raise _api_error("create", e, kind) from None
                    said = mine     # whose it is is not known yet: again
                elif (e.status == 403 and "status unknown for quota" in (e.body or "")
                        and time.monotonic() < uncounted_until):
                    # The namespace's quota is not counted yet (its first
                    # moments, or the quota controller catching up): nothing
                    # was made; the same create again, shortly.
                    time.sleep(0.2)
                    continue
                elif e.status in RETRY_STATUS:
                    said, wait = e, _retry_after(e)
                else:
                    raise _api_error("create", e, kind) from None
            except urllib3.exceptions.HTTPError as e:
                if not _transient(e):
                    raise AirlockError("create: %s" % e) from None
                said = e
            now = time.monotonic()
            if now >= until:
                took = int(round(now - start))
                if self.create_retry == 0:
                    if isinstance(said, ApiException):
                        raise _api_error("create", said, kind) from None
                    raise AirlockError("create: %s" % said) from None
                if isinstance(said, ApiException):
                    raise AirlockError(
                        "create: the API server refused it for %d s (%d tries), last with "
                        "HTTP %s: %s" % (took, tries, said.status, _status_message(said))
                    ) from None
                raise AirlockError("create: no answer from the API server for %d s "
                                   "(%d tries): %s" % (took, tries, said)) from None
            if wait is None:
                wait = random.uniform(backoff / 2, backoff)   # jittered, as the CLI's
                backoff = min(backoff * 2, 2.0)
            time.sleep(min(wait, until - now))

    def _ours(self, plural: str, name: str, token: str):
        """Whether the object named name is this create's (True), another's
        (False), or unknown yet (the exception that hid it)."""
        try:
            o = self._api.get_namespaced_custom_object(GROUP, VERSION, self.namespace,
                                                       plural, name,
                                                       _request_timeout=REQUEST_TIMEOUT)
        except ApiException as e:
            return e if e.status in RETRY_STATUS + (404,) else False
        except urllib3.exceptions.HTTPError as e:
            return e if _transient(e) else False
        ann = (o.get("metadata") or {}).get("annotations") or {}
        return ann.get(TOKEN_ANNOTATION) == token

    def get(self, name: str) -> Result:
        obj = self._get(name)
        return Result.from_object(obj, self._files_out(obj))

    def _files_out(self, obj: dict) -> Callable[[], dict]:
        """A loader of obj's CodeExecutionArtifacts, fetched once, refused
        if it is another execution's of the same name."""
        name, uid, cache = obj["metadata"]["name"], obj["metadata"].get("uid"), []

        def load() -> dict:
            if not cache:
                try:
                    o = self._api.get_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, ARTIFACTS_PLURAL, name,
                        _request_timeout=REQUEST_TIMEOUT)
                except ApiException as e:
                    raise _api_error("get files out of %s" % name, e) from None
                labels = (o.get("metadata") or {}).get("labels") or {}
                if labels.get("airlock.dev/execution-uid") != uid:
                    raise AirlockError("the files out named %s are another execution's"
                                       % name)
                cache.append(o)
            return cache[0]
        return load

    def _get(self, name: str, plural: str = PLURAL) -> dict:
        try:
            return self._api.get_namespaced_custom_object(GROUP, VERSION, self.namespace,
                                                          plural, name,
                                                          _request_timeout=REQUEST_TIMEOUT)
        except ApiException as e:
            raise _api_error("get %s" % name, e) from None

    def cancel(self, name: str) -> None:
        """Ask the controller to stop it (``spec.cancel``); it ends Cancelled."""
        try:
            self._api.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL,
                                                     name, {"spec": {"cancel": True}},
                                                     _request_timeout=REQUEST_TIMEOUT)
        except ApiException as e:
            raise _api_error("cancel %s" % name, e) from None

    def delete(self, name: str) -> None:
        try:
            self._api.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL,
                                                      name, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as e:
            if e.status != 404:
                raise _api_error("delete %s" % name, e) from None

    # --- waiting ----------------------------------------------------------

    def wait(self, name: str, timeout: Optional[float] = None, on_stdout: Callback = None,
             on_stderr: Callback = None) -> Result:
        """Wait for the execution's end on a watch of it alone, handing the
        callbacks each stream's new text as the status shows it. Raises
        RejectedError if it was refused before running (``Rejected``)."""
        emit = _Emitter(on_stdout, on_stderr)

        def ended(obj):
            emit.feed(obj.get("status") or {})
            return (obj.get("status") or {}).get("phase") in TERMINAL

        obj = self._watch_until(PLURAL, name, ended, timeout,
                                "%s was deleted before it ended" % name)
        if obj is None:
            raise AirlockError("%s did not end within %g s" % (name, timeout))
        return self._ended(obj)

    def _watch_until(self, plural: str, name: str, done: Callable[[dict], bool],
                     timeout: Optional[float], deleted: str,
                     last: Optional[list] = None) -> Optional[dict]:
        """The object named name once done(it) is true, on a watch of it
        alone (segments of at most 60 s, a 410 or a silent connection
        answered by a fresh get); None when timeout seconds passed first
        (its last state then appended to ``last``). A DELETED event raises
        AirlockError(deleted)."""
        end = None if timeout is None else time.monotonic() + timeout
        obj = self._get(name, plural)
        while True:
            if done(obj):
                return obj
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                if last is not None:
                    last.append(obj)
                return None
            seg = 60 if left is None else max(1, min(60, int(math.ceil(left))))
            w = kubernetes.watch.Watch()
            try:
                for ev in w.stream(self._api.list_namespaced_custom_object, GROUP, VERSION,
                                   self.namespace, plural,
                                   field_selector="metadata.name=" + name,
                                   resource_version=obj["metadata"]["resourceVersion"],
                                   timeout_seconds=seg, allow_watch_bookmarks=False,
                                   _request_timeout=(REQUEST_TIMEOUT[0], seg + WATCH_SLACK)):
                    if ev["type"] == "DELETED":
                        raise AirlockError(deleted)
                    if ev["type"] not in ("ADDED", "MODIFIED"):
                        continue
                    obj = ev["object"]
                    if done(obj):
                        return obj
                continue            # the segment ended: a new watch from obj
            except ApiException as e:
                if e.status != 410:
                    raise _api_error("watch %s" % name, e) from None
            except urllib3.exceptions.ReadTimeoutError:
                pass                # a silent connection: a fresh get, a new watch
            finally:
                w.stop()
            obj = self._get(name, plural)

    def _ended(self, obj: dict) -> Result:
        r = Result.from_object(obj, self._files_out(obj))
        if r.reason == "Rejected":
            m = FIELD_RE.match(r.message or "")
            err = RejectedError("%s was rejected: %s" % (r.name, r.message),
                                m.group(1) if m else None)
            err.result = r
            raise err
        return r

    # --- both -------------------------------------------------------------

    def run(self, code: Union[str, bytes], runtime: str = "python", *,
            stdin: Union[str, bytes, None] = None,
            files: Optional[Mapping[str, Union[str, bytes]]] = None,
            env: Optional[Mapping[str, str]] = None, args: Optional[List[str]] = None,
            timeout: Optional[float] = None, memory: Union[str, int, None] = None,
            cpu: Union[str, int, None] = None, name: Optional[str] = None,
            on_stdout: Callback = None, on_stderr: Callback = None,
            session: Optional[str] = None) -> Result:
        """Run code and return how it ended. A non-zero exit is a result
        (``r.exit_code``); a KeyboardInterrupt cancels the execution, waits
        briefly for its Cancelled, and is raised again. ``session``: a step
        of that session (``Client.session``'s ``Session.run`` names it)."""
        n = name or new_name()
        try:
            # With a callback, the output is copied into the status as it
            # comes (spec.output.stream), and handed on as it grows.
            self.create(code, runtime, stdin=stdin, files=files, env=env, args=args,
                        timeout=timeout, memory=memory, cpu=cpu, name=n,
                        stream=on_stdout is not None or on_stderr is not None,
                        session=session)
            return self.wait(n, on_stdout=on_stdout, on_stderr=on_stderr)
        except KeyboardInterrupt:
            self._cancel_after_interrupt(n)
            raise

    def _cancel_after_interrupt(self, name):
        """Cancel name, which an interrupted create may still be making,
        and wait briefly for its end; nothing here replaces the interrupt."""
        import time

        try:
            for attempt in range(4):
                try:
                    self.cancel(name)
                    break
                except AirlockError as e:
                    if "HTTP 404" not in str(e) or attempt == 3:
                        return      # never made (or cannot be): nothing to end
                    time.sleep(0.5)
            self.wait(name, timeout=10)
        except (AirlockError, KeyboardInterrupt):
            pass

    # --- sessions -----------------------------------------------------------

    def session(self, runtime: str = "python", *, resources: Optional[Mapping] = None,
                idle_timeout: Optional[float] = None, max_lifetime: Optional[float] = None,
                files: Optional[Mapping[str, Union[str, bytes]]] = None,
                name: Optional[str] = None, ready_timeout: Optional[float] = 60):
        """Open a CodeSession (docs/sessions.md): one sandbox and one
        interpreter kept across steps. Waits up to ``ready_timeout`` seconds
        for it to be Ready; see ``airlock.Session``. Use it as a context
        manager to close it on exit."""
        from ._session import Session

        return Session.open(self, runtime, resources=resources, idle_timeout=idle_timeout,
                            max_lifetime=max_lifetime, files=files, name=name,
                            ready_timeout=ready_timeout)
