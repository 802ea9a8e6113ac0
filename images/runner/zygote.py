# /airlock/bin/zygote.py - a preload profile's holder (docs/warm-path.md,
# "The zygote"): one Python process that has imported the profile's
# modules and forks a child for each program warm hands it, so that the
# imports (pandas, numpy, matplotlib: ~2 s) are paid before the claim.
#
#   python3 -I /airlock/bin/zygote.py [PROFILE COMMAND...]
#
# started by `run --zygote SOURCEFILE PYTHON [ARG...]`, which passes the
# profile's command on (when it names policy.py, that file is loaded here
# ahead, not in each child). AIRLOCK_PRELOAD: the modules, comma-separated,
# imported in order; AIRLOCK_WARMUP: Python run once after them in a
# namespace of its own, thrown away (a figure drawn and closed with Agg:
# matplotlib's font cache). A failure of either: one line on stderr and in
# /dev/termination-log (when there and writable),
#
#   airlock: preload: MODULE: ExcType: message      (MODULE "warm-up" for it)
#
# and exit 3; the socket is never made. Otherwise the socket is made at
# $AIRLOCK_ZYGOTE_SOCK (/dev/shm/airlock-zygote.sock), mode 0600, bound
# under another name and renamed there once it listens: its existence is
# the holder's readiness (the startup probe: `test -S` on it).
#
# The protocol, one request a connection (warm.c's zygote_spawn is the
# client):
#
#   request   "SPAWN ARGC ENVC LEN\n" then LEN bytes: ARGC arguments, ENVC
#             environment entries ("NAME=VALUE") and the working directory,
#             each ended by a NUL; with the client's fds 0, 1 and 2 as
#             SCM_RIGHTS on its bytes (exactly 3). The header line is at
#             most 64 bytes; LEN at most 256 KiB, ARGC 1..4096, ENVC
#             0..4096. Nothing may follow it.
#   answers   "PID N\n" once the child is forked, then "EXIT S\n" when it
#             is reaped: S its exit code, or 128 + the signal that ended
#             it; then the connection is closed.
#   refusal   "ERR why\n", then closed: a request out of bounds or
#             malformed, not complete within 10 s, more than 16
#             connections at once, or an argv or env this process cannot
#             run as the interpreter would (below). No child was forked:
#             the client runs the program itself (warm execs it).
#
# The client going away does not end the child (a session's kernel
# outlives the step that started it); its status is then dropped.
# The child of the next request is forked ahead (the prefork, below):
# under gVisor the fork of a process with pandas loaded, and the child's
# first steps, cost 200-300 ms that a request then does not wait for.
# Single-threaded: poll on the listening socket, the connections and a
# SIGCHLD wake-up pipe, children reaped with WNOHANG; fork is never
# called from a threaded process of ours (a library's threads, OpenBLAS's,
# are its atfork handlers' business).
#
# argv accepted (PROG not starting with "-"):
#   [python3|python, PROG, ARG...]            as `python3 PROG ARG...`
#   [python3|python, -I, PROG, ARG...]        as `python3 -I PROG ARG...`
#   [python3|python, -I, .../policy.py, DENIED, PROG, ARG...]
#                                             the code policy, in-process
# A session's kernel ([python3, /airlock/bin/kernel.py]) is the first form.
# Without -I, an environment variable that would configure the interpreter
# (PYTHON*, but PYTHONUNBUFFERED and PYTHONDONTWRITEBYTECODE, emulated) is
# refused: this interpreter started without it.
#
# The child (what it inherits is in docs/warm-path.md): setsid(); the fds
# dup2'd onto 0-2, every other closed; fresh stdio objects on them; the
# signal dispositions of a fresh interpreter; os.environ exactly the
# request's; the working directory; sys.argv and sys.path[0] as python3
# sets them; random (and numpy's global RNG) reseeded; the denied modules
# of a policy removed from sys.modules before the policy is installed; the
# program run as __main__ as python3 runs a file (runpy.run_path for a
# directory or a zip); the exit as python3's
# (SystemExit's code, 1 and the traceback for an exception, SIGINT for
# KeyboardInterrupt), after non-daemon threads, atexit and a flush.
import sys

# What a fresh `python3 -I` has loaded before any code of its own: the
# denied modules among them are the ones policy.py leaves its file checks
# off for (their code is in memory already), as it does in its own process.
STARTUP = frozenset(sys.modules)

import builtins
import gc
import importlib.machinery
import importlib.util
import io
import marshal
import os
import pkgutil
import runpy
import select
import signal
import socket
import time

SOCK = os.environ.get("AIRLOCK_ZYGOTE_SOCK") or "/dev/shm/airlock-zygote.sock"
HEAD_MAX = 64
BODY_MAX = 256 << 10
ARGS_MAX = 4096
ENV_MAX = 4096
CONNS_MAX = 16
REQUEST_S = 10
PREFIX = "airlock: zygote: "
PYTHON_ENV_OK = ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")
ME = os.path.abspath(__file__)

policies = {}       # policy.py's path -> its module, loaded once
policy_deny = {}    # policy.py's path -> the DENIED of the start command


def fail(module, exc):
    line = "airlock: preload: %s: %s: %s" % (
        module, type(exc).__name__, " ".join(str(exc).split()))
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    try:
        # Only where Kubernetes made it: never created here.
        fd = os.open("/dev/termination-log", os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
        try:
            os.write(fd, (line + "\n").encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass
    os._exit(3)


def preload():
    for name in (os.environ.get("AIRLOCK_PRELOAD") or "").split(","):
        name = name.strip()
        if not name:
            continue
        try:
            importlib.import_module(name)
        except BaseException as e:   # SystemExit too: it is the module's failure
            fail(name, e)
    snippet = os.environ.get("AIRLOCK_WARMUP")
    if snippet:
        try:
            exec(compile(snippet, "<warm-up>", "exec"),
                 {"__name__": "__warmup__", "__builtins__": __builtins__})
        except BaseException as e:
            fail("warm-up", e)


def load_policy(path):
    # At the start only (main): the profile's command names it.
    mod = policies.get(path)
    if mod is None:
        spec = importlib.util.spec_from_file_location("airlock_policy", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        policies[path] = mod
    return mod


def parse_argv(argv, env):
    """The request's argv as a run: (kind, policy, prog, args, isolated),
    kind "plain" or "policy"; ValueError(why) when it is not one."""
    if os.path.basename(argv[0]) not in ("python3", "python"):
        raise ValueError("argv[0] is not python3 or python")
    rest = argv[1:]
    isolated = rest[:1] == ["-I"]
    if isolated:
        rest = rest[1:]
    if not rest or not rest[0] or rest[0].startswith("-"):
        raise ValueError("argv has no program, or an option other than -I")
    if not isolated:
        for e in env:
            name = e.split("=", 1)[0]
            if name.startswith("PYTHON") and name not in PYTHON_ENV_OK:
                raise ValueError("%s in the environment configures the "
                                 "interpreter" % name)
    if isolated and os.path.basename(rest[0]) == "policy.py":
        if len(rest) < 3 or not rest[2] or rest[2].startswith("-"):
            raise ValueError("policy.py's argv has no DENIED and PROGRAM")
        # Only the one this process loaded at its start (the profile's):
        # a request naming another file does not make the zygote run it.
        if rest[0] not in policies:
            raise ValueError("%s is not the policy this zygote loaded" % rest[0])
        # And only with its list: a request never runs a program under
        # less than the profile's policy.
        if rest[1] != policy_deny[rest[0]]:
            raise ValueError("the policy's DENIED is not the profile's")
        return "policy", (rest[0], rest[1]), rest[2], rest[3:], True
    return "plain", None, rest[0], rest[1:], isolated


# --- the child ---------------------------------------------------------------

def fresh_stdio(unbuffered):
    # As the interpreter makes them at its start (create_stdio): closefd
    # off, "\n" newlines; buffered, line by line on a terminal (stderr
    # always), or with -u (PYTHONUNBUFFERED) stdout and stderr raw and
    # all three written through; the encoding and errors this interpreter
    # chose (the same locale).
    def one(fd, write, like):
        raw_buf = 0 if (write and unbuffered) else -1
        buf = io.open(fd, "wb" if write else "rb", buffering=raw_buf, closefd=False)
        t = io.TextIOWrapper(buf, encoding=like.encoding, errors=like.errors,
                             newline="\n",
                             line_buffering=not unbuffered and (fd == 2 or os.isatty(fd)),
                             write_through=unbuffered)
        t.mode = "w" if write else "r"
        return t

    sys.stdin = sys.__stdin__ = one(0, False, sys.__stdin__ or sys.stdin)
    sys.stdout = sys.__stdout__ = one(1, True, sys.__stdout__ or sys.stdout)
    sys.stderr = sys.__stderr__ = one(2, True, sys.__stderr__ or sys.stderr)


def fresh_signals():
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            if signal.getsignal(sig) != signal.SIG_DFL:
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
    # CPython's own at its start.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def close_other_fds(keep=-1):
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        if keep > 2:
            os.closerange(3, keep)
            os.closerange(keep + 1, 65536)
        else:
            os.closerange(3, 65536)
        return
    for fd in fds:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass        # listdir's own, closed already


def internal(code):
    fn = code.co_filename
    return fn == ME or fn == runpy._run_code.__code__.co_filename


def uncaught(e):
    # sys.excepthook (the program's, policy.py's) on the traceback from
    # the program's first frame, as python3 shows it.
    tb = e.__traceback__
    while tb is not None and internal(tb.tb_frame.f_code):
        tb = tb.tb_next
    e = e.with_traceback(tb)    # what the hook prints, not its tb argument
    try:
        sys.excepthook(type(e), e, tb)
    except BaseException:
        import traceback
        traceback.print_exception(type(e), e, tb)


def exit_code(e):
    # _Py_HandleSystemExit.
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xff
    try:
        if sys.stderr is not None:
            sys.stderr.write(str(code) + "\n")
        else:
            os.write(2, (str(code) + "\n").encode("utf-8", "replace"))
    except BaseException:
        pass
    return 1


def finish(code):
    # Py_FinalizeEx's order: non-daemon threads, atexit, then stdio.
    t = sys.modules.get("threading")
    if t is not None:
        try:
            t._shutdown()
        except BaseException:
            pass
    import atexit
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            if f is not None:
                f.flush()
        except BaseException:
            if f is sys.stdout and code == 0:
                code = 120      # as python3 when stdout cannot be flushed
    return code


def reseed():
    if "random" in sys.modules:
        sys.modules["random"].seed()
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()


def run_child(kind, policy, prog, args, isolated, argv):
    if "time" in sys.modules:
        sys.modules["time"].tzset()
    sys.orig_argv = list(argv)
    if kind == "policy":
        mod = policies[policy[0]]
        deny = frozenset(m for m in policy[1].split(",") if m)

        def denied(name):
            parts = name.split(".")
            return any(".".join(parts[:i]) in deny for i in range(1, len(parts) + 1))

        # The program must not find a preloaded denied module in sys.modules.
        # (kept: a library the program imports later gets the same copy).
        taken = {m: sys.modules.pop(m) for m in list(sys.modules) if denied(m)}
        mod.run(deny, prog, [prog] + args,
                preloaded=frozenset(m for m in STARTUP if denied(m)), taken=taken)
        return
    sys.argv = [prog] + args
    if not isolated:
        sys.path.insert(0, os.path.dirname(os.path.realpath(prog)))
    path = os.path.abspath(prog)
    if pkgutil.get_importer(path) is not None:
        runpy.run_path(prog, run_name="__main__")   # a directory or a zip
        return
    # As pymain_run_file: __file__ absolute, __loader__ a SourceFileLoader,
    # no __spec__ or __cached__ (runpy.run_path would leave __file__ and the
    # traceback's paths as given, and sys.argv[0] made absolute).
    try:
        with io.open_code(path) as f:
            src = f.read()
    except OSError as e:
        # python3's own words and status for a program it cannot open.
        sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n" % (
            argv[0], path, e.errno, e.strerror))
        raise SystemExit(2)
    code = compile(src, path, "exec", dont_inherit=True)
    main = type(sys)("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__builtins__ = builtins
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    main.__spec__ = None
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def child_start(keep):
    """A child's first part, before any request (a prefork's ahead): its
    own session, a fresh interpreter's signals and seed; the server's
    sockets keep detached (their fds are closed later, by number: no
    object closes one that has been reused)."""
    os.setsid()
    signal.set_wakeup_fd(-1)
    for s in keep:
        s.detach()
    fresh_signals()
    reseed()


def child(req, fds, keep, early=True):
    # early: child_start here; a prefork (below) did it ahead.
    code = 125
    interrupted = False
    try:
        if early:
            child_start(keep)
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
        close_other_fds()
        kind, policy, prog, args, isolated, argv, env, cwd = req
        os.environb.clear()
        for e in env:
            name, value = e.split(b"=", 1)
            if name not in os.environb:     # the first of a name, as getenv
                os.environb[name] = value
        unbuffered = not isolated and bool(os.environ.get("PYTHONUNBUFFERED"))
        if not isolated and os.environ.get("PYTHONDONTWRITEBYTECODE"):
            sys.dont_write_bytecode = True
        fresh_stdio(unbuffered)
        os.chdir(cwd)
        code = 0
        try:
            run_child(kind, policy, prog, args, isolated, argv)
        except SystemExit as e:
            code = exit_code(e)
        except KeyboardInterrupt as e:
            uncaught(e)
            interrupted = True
            code = 1
        except BaseException as e:
            uncaught(e)
            code = 1
        code = finish(code)
        if interrupted:
            # As python3: the default action, so the parent sees SIGINT.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    except BaseException as e:
        try:
            os.write(2, ("%scannot run the program: %s: %s\n" % (
                PREFIX, type(e).__name__, e)).encode("utf-8", "replace"))
        except BaseException:
            pass
        code = 125
    finally:
        os._exit(code)


# --- the prefork ------------------------------------------------------------
#
# Forking this process costs 100-180 ms under gVisor once pandas, numpy and
# matplotlib are loaded (their mappings are copied), and the child's first
# steps more (measured in a python-data holder: PID answered 94-178 ms
# after the request, the program's first line 100 ms after that). So the
# child of the next request is forked ahead, while the sandbox waits: it
# does the early part of child() (its own session, a fresh interpreter's
# signals, a fresh seed), then blocks on a socket of its own for the
# request, which the server hands it whole: "LEN(8 bytes, big-endian)" and
# LEN bytes of marshal'd request, with the request's 3 fds (SCM_RIGHTS);
# then "G" once the client has its PID (a program that ends the zygote at
# once must not leave the client without its pid: it could not kill it).
# It exits 0 at EOF (the zygote gone, or done with it). One at a time:
# made at the start (before the socket is there: readiness includes it),
# and again PREFORK_AFTER_S after the last child ended (a one-shot
# sandbox is deleted by then; a session's kernel restarted gets it).

PREFORK_AFTER_S = 2.0


def prefork(keep):
    """A child forked ahead: (pid, the server's end of its socket)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 125
        try:
            child_start(keep + [a])
            close_other_fds(b.fileno())
            buf, fds, n = bytearray(), [], -1
            while n < 0 or len(buf) < 8 + n:
                data, anc, _, _ = b.recvmsg(65536, socket.CMSG_SPACE(3 * 4))
                for level, typ, d in anc:
                    if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                        fds += list(memoryview(d)[:len(d) - len(d) % 4].cast("i"))
                if not data:
                    os._exit(0)
                buf += data
                if n < 0 and len(buf) >= 8:
                    n = int.from_bytes(buf[:8], "big")
            req = marshal.loads(bytes(buf[8:8 + n]))
            # Then "G", once the server has answered PID: the program
            # must not end the zygote before the client knows its pid.
            go = bytes(buf[8 + n:9 + n])
            while not go:
                go = b.recv(1)
                if not go:
                    break
            if go != b"G":
                os._exit(125)
            b.detach()          # closed with the rest in child()
            child(req, fds, [], early=False)
        except BaseException:
            pass
        os._exit(code)
    b.close()
    return pid, a


def hand(pre, req, fds):
    """Give the prefork (pid, sock) the request and its fds: True once all
    its bytes are sent; False, it killed, when they could not all be sent
    (it runs nothing short of the whole request, and nothing before go)."""
    pid, a = pre
    data = marshal.dumps(req)
    msg = len(data).to_bytes(8, "big") + data
    sent = 0
    try:
        a.setblocking(True)
        a.settimeout(REQUEST_S)
        sent = socket.send_fds(a, [msg[:65536]], fds)
        while sent < len(msg):
            sent += a.send(msg[sent:])
    except OSError:
        pass
    if sent == len(msg):
        return True
    a.close()
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    return False


def go(a):
    """Let the prefork handed a request run it (its pid is answered); one
    that cannot be told exits 125 at EOF, never running it."""
    try:
        a.send(b"G")
    except OSError:
        pass
    a.close()


# --- the server --------------------------------------------------------------

class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()      # appended in place: no copy a read
        self.fds = []
        self.pid = 0
        self.deadline = time.monotonic() + REQUEST_S

    def close(self):
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        try:
            self.sock.close()
        except OSError:
            pass


def send(c, line):
    try:
        c.sock.send(line.encode("utf-8", "replace"), socket.MSG_NOSIGNAL)
        return True
    except OSError:
        return False


def parse(c):
    """The request in c.buf: None while incomplete; ValueError when bad."""
    nl = c.buf.find(b"\n", 0, HEAD_MAX)
    if nl < 0:
        if len(c.buf) >= HEAD_MAX:
            raise ValueError("the request line is over %d bytes" % HEAD_MAX)
        return None
    f = bytes(c.buf[:nl]).split(b" ")
    if len(f) != 4 or f[0] != b"SPAWN" or not all(x.isdigit() and len(x) <= 7 for x in f[1:]):
        raise ValueError("the request is not 'SPAWN ARGC ENVC LEN'")
    argc, envc, n = int(f[1]), int(f[2]), int(f[3])
    if not 1 <= argc <= ARGS_MAX or envc > ENV_MAX or n > BODY_MAX:
        raise ValueError("ARGC, ENVC or LEN is out of bounds")
    have = len(c.buf) - nl - 1      # counted, not copied, until it is all here
    if have < n:
        return None
    if have > n:
        raise ValueError("bytes follow the request")
    body = bytes(c.buf[nl + 1:])
    if len(c.fds) != 3:
        raise ValueError("the request has %d fds, not 3" % len(c.fds))
    parts = body.split(b"\0")
    if not body.endswith(b"\0") or len(parts) != argc + envc + 2:
        raise ValueError("the body does not hold ARGC + ENVC + 1 strings")
    argv = [os.fsdecode(a) for a in parts[:argc]]
    env = parts[argc:argc + envc]
    cwd = parts[argc + envc]
    for e in env:
        if e.find(b"=") < 1:
            raise ValueError("an environment entry is not NAME=VALUE")
    if not cwd.startswith(b"/"):
        raise ValueError("the working directory is not absolute")
    kind, policy, prog, args, isolated = parse_argv(argv, [os.fsdecode(e) for e in env])
    return (kind, policy, prog, args, isolated, argv, env, cwd)


def serve(lsock, wake_r, pre=None):
    conns = {}          # fd -> Conn
    by_pid = {}         # pid -> Conn, or None when its client is gone
    # The prefork: {"pid", "sock"} while one waits; "after": when to make
    # the next (0: none to make).
    pf = {"pid": pre[0], "sock": pre[1], "after": 0.0} if pre else \
        {"pid": 0, "sock": None, "after": time.monotonic()}
    poller = select.poll()
    poller.register(lsock.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)

    def drop(c):
        if c.sock.fileno() in conns:
            poller.unregister(c.sock.fileno())
            del conns[c.sock.fileno()]
        if c.pid:
            by_pid[c.pid] = None
        c.close()

    def refuse(c, why):
        send(c, "ERR %s\n" % " ".join(why.split())[:200])
        drop(c)

    while True:
        now = time.monotonic()
        for c in list(conns.values()):
            if not c.pid and now >= c.deadline:
                refuse(c, "the request did not come within %d s" % REQUEST_S)
        try:
            events = poller.poll(1000)
        except InterruptedError:
            events = []
        for fd, ev in events:
            if fd == wake_r:
                try:
                    os.read(wake_r, 4096)
                except OSError:
                    pass
                continue
            if fd == lsock.fileno():
                try:
                    s, _ = lsock.accept()
                except OSError:
                    continue
                s.setblocking(False)
                c = Conn(s)
                if len(conns) >= CONNS_MAX:
                    send(c, "ERR more than %d connections\n" % CONNS_MAX)
                    c.close()
                    continue
                conns[s.fileno()] = c
                poller.register(s.fileno(), select.POLLIN)
                continue
            c = conns.get(fd)
            if c is None:
                continue
            try:
                data, anc, flags, _ = c.sock.recvmsg(
                    65536, socket.CMSG_SPACE(16 * 4), socket.MSG_CMSG_CLOEXEC)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                drop(c)
                continue
            for level, typ, b in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    n = len(b) - len(b) % 4
                    c.fds += list(memoryview(b)[:n].cast("i"))
            if c.pid:
                # The child runs; only the client's going matters.
                for x in c.fds:
                    os.close(x)
                c.fds = []
                if not data:
                    drop(c)
                continue
            if not data:
                drop(c)
                continue
            if flags & socket.MSG_CTRUNC or len(c.fds) > 3:
                refuse(c, "the request has more than 3 fds")
                continue
            c.buf += data
            try:
                req = parse(c)
            except ValueError as e:
                refuse(c, str(e))
                continue
            except Exception as e:
                refuse(c, "bad request: %s" % type(e).__name__)
                continue
            if req is None:
                continue
            spawn(c, req, lsock, conns, by_pid, refuse, pf)
        if reap(by_pid, drop, pf):
            pf["after"] = time.monotonic() + PREFORK_AFTER_S
        if (pf["pid"] == 0 and pf["after"] and not by_pid and
                time.monotonic() >= pf["after"]):
            try:
                pf["pid"], pf["sock"] = prefork([lsock] + [x.sock for x in conns.values()])
                pf["after"] = 0.0
            except OSError:
                pf["after"] = time.monotonic() + PREFORK_AFTER_S


def spawn(c, req, lsock, conns, by_pid, refuse, pf):
    pid, handed = 0, None
    if pf["pid"]:
        pre = (pf["pid"], pf["sock"])
        pf["pid"], pf["sock"] = 0, None
        if hand(pre, req, c.fds):
            pid, handed = pre
    if not pid:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as e:
            refuse(c, "cannot fork: %s" % e.strerror)
            return
        if pid == 0:
            child(req, c.fds, [lsock] + [x.sock for x in conns.values()])
    for fd in c.fds:
        os.close(fd)
    c.fds = []
    c.pid = pid
    c.buf = bytearray()
    by_pid[pid] = c
    if not send(c, "PID %d\n" % pid):
        by_pid[pid] = None
    if handed is not None:
        go(handed)


def reap(by_pid, drop, pf):
    """Children ended, reaped: whether one was a program's."""
    ended = False
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        if pid == pf["pid"]:        # the prefork died waiting: another later
            pf["sock"].close()
            pf["pid"], pf["sock"] = 0, None
            ended = True
        if pid in by_pid:
            ended = True
        c = by_pid.pop(pid, None)
        if c is None:
            continue
        code = os.waitstatus_to_exitcode(st)
        send(c, "EXIT %d\n" % (code if code >= 0 else 128 - code))
        c.pid = 0
        drop(c)


def main():
    # 0-2 open, so that the fds a request brings never land on them.
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open("/dev/null", os.O_RDWR)
    args = sys.argv[1:]
    preload()
    try:
        if len(args) >= 4 and args[1] == "-I" and os.path.basename(args[2]) == "policy.py":
            load_policy(args[2])
            policy_deny[args[2]] = args[3]
    except Exception as e:
        fail("policy.py", e)
    for m in ("atexit", "traceback"):       # what a child may need
        importlib.import_module(m)

    if os.getpid() == 1:
        # The sandbox's init: the kernel gives it only the signals it
        # handles, and Python handles SIGINT (KeyboardInterrupt). A
        # program of ours must not end it that way (a session's kernel,
        # its child, would go with it); a child's are reset (fresh_signals).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda s, f: None)

    tmp = "%s.%d.tmp" % (SOCK, os.getpid())
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    old = os.umask(0o177)
    try:
        lsock.bind(tmp)
    finally:
        os.umask(old)
    os.chmod(tmp, 0o600)
    lsock.listen(64)
    lsock.setblocking(False)
    # What the children share of the heap stays shared: no collection
    # in a child touches the objects made up to here.
    gc.collect()
    gc.freeze()
    try:
        pre = prefork([lsock])
    except OSError:
        pre = None
    os.rename(tmp, SOCK)
    serve(lsock, wake_r, pre)


if __name__ == "__main__":
    main()
