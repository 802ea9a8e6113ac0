# /airlock/bin/kernel.py - a Python session's kernel (docs/sessions.md).
#
#   python3 /airlock/bin/kernel.py
#
# One per session, started by the first step's `warm --step` in the
# session's sandbox, and kept: its globals, its imports and the working
# directory's files are what the session keeps between executions. It
# talks to `warm --step` through the session directory
# ($AIRLOCK_SESSION_DIR, /dev/shm/airlock-session):
#
#   kernel.lock  held (flock) for the kernel's life: a step client that
#                can take it knows no kernel runs
#   ctl          FIFO, client -> kernel: "RUN SEQ\n", one step
#   ack          FIFO, kernel -> client: "READY PID\n" once started,
#                "DONE SEQ KIND CODE DROPPED\n" after each step
#   step/code    the step's program text; step/stdin its standard input
#                (absent: /dev/null); step/env its environment (NUL-separated
#                NAME=VALUE: os.environ is that while it runs, the kernel's
#                own again after); step/out and step/err FIFOs its
#                standard output and error; step/value the text of the
#                value of its last expression, written here
#
# KIND is ok, error (an exception: its traceback on stderr, CODE 1) or
# exit (SystemExit: CODE its status; the kernel then exits, and the client
# starts a new one). DROPPED counts the bytes written to stdout or stderr
# while no step ran (a thread the program left running): they go nowhere.
#
# A step's value: as in a notebook cell, the last statement, when it is an
# expression and not None, is shown, as repr() (text/plain), cut to
# VALUE_MAX bytes of UTF-8. Figures: matplotlib draws with the backend
# below, whose show() saves each figure as a PNG under $AIRLOCK_OUT_DIR
# (/airlock/out, files out); a figure still open at the step's end is
# saved too, then all are closed (as the inline backend does). display(x)
# shows x: a figure saved so, anything else printed as repr().
#
# SIGINT (the client's timeout) raises KeyboardInterrupt in the step; the
# client restarts a kernel that does not come back within its grace.
import ast
import builtins
import fcntl
import linecache
import os
import select
import signal
import sys
import threading
import traceback
import types

SESSION = os.environ.get("AIRLOCK_SESSION_DIR", "/dev/shm/airlock-session")
OUT = os.environ.get("AIRLOCK_OUT_DIR", "/airlock/out")
VALUE_MAX = 4096
KERNEL_FILE = os.path.abspath(__file__)


class Kernel:
    def __init__(self):
        self.running = False
        self.dropped = 0
        self.figures = 0
        self.lock = threading.Lock()
        self.value = None
        self.count = 0
        self.main = types.ModuleType("__main__")
        self.main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = self.main
        builtins.display = self.display

    # -- output between steps: counted, dropped ---------------------------

    def sink(self):
        r, w = os.pipe()
        os.set_inheritable(w, False)
        os.set_blocking(r, False)
        self.sinkr = r

        def drain():
            while True:
                select.select([r], [], [])
                if not self.drain_sink():
                    return

        threading.Thread(target=drain, daemon=True).start()
        return w

    def drain_sink(self):
        """Count what the sink holds now: False at its end."""
        with self.lock:
            while True:
                try:
                    b = os.read(self.sinkr, 65536)
                except BlockingIOError:
                    return True
                except OSError:
                    return False
                if not b:
                    return False
                self.dropped += len(b)

    def take_dropped(self):
        # What was written before now is counted now, not when the
        # thread gets to it.
        self.drain_sink()
        with self.lock:
            n, self.dropped = self.dropped, 0
        return n

    # -- figures ------------------------------------------------------------

    def save_figure(self, fig):
        os.makedirs(OUT, exist_ok=True)
        self.figures += 1
        path = os.path.join(OUT, "figure-%d.png" % self.figures)
        try:
            fig.savefig(path, format="png")
        except Exception as e:  # a figure that cannot draw: said, not fatal
            sys.stderr.write("airlock: figure %d not saved: %s\n" % (self.figures, e))

    def show(self, *args, **kwargs):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for n in plt.get_fignums():
            self.save_figure(plt.figure(n))
        plt.close("all")

    def display(self, *objs, **kwargs):
        plt = sys.modules.get("matplotlib.pyplot")
        for o in objs:
            if plt is not None and hasattr(o, "savefig") and hasattr(o, "number"):
                self.save_figure(o)
                plt.close(o)
            elif o is not None:
                print(repr(o))

    def backend(self):
        """module://airlock_mpl: Agg's canvas, and show() saving figures."""
        mod = types.ModuleType("airlock_mpl")

        def getattr_(name):
            if name == "FigureCanvas":
                from matplotlib.backends.backend_agg import FigureCanvasAgg
                return FigureCanvasAgg
            raise AttributeError(name)

        mod.__getattr__ = getattr_
        mod.show = self.show
        sys.modules["airlock_mpl"] = mod
        if os.environ.get("MPLBACKEND", "").lower() in ("", "agg"):
            os.environ["MPLBACKEND"] = "module://airlock_mpl"

    # -- a step ---------------------------------------------------------------

    def displayhook(self, v):
        if v is None:
            return
        self.value = v

    def run(self, seq, src):
        """Run src in __main__: (kind, code)."""
        self.count += 1
        name = "<step %d>" % self.count
        ns = self.main.__dict__
        self.value = None
        self.figures = 0
        try:
            text = src.decode("utf-8", "surrogateescape") if isinstance(src, bytes) else src
            linecache.cache[name] = (len(text), None, text.splitlines(True), name)
            tree = ast.parse(src, filename=name)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Interactive(body=[tree.body.pop()])
            self.running = True
            exec(compile(tree, name, "exec"), ns)
            if last is not None:
                exec(compile(last, name, "single"), ns)
            kind, code = "ok", 0
        except SystemExit as e:
            c = e.code
            if c is None:
                code = 0
            elif isinstance(c, int):
                code = c & 0xFF
            else:
                sys.stderr.write("%s\n" % (c,))
                code = 1
            kind = "exit"
        except BaseException as e:  # KeyboardInterrupt too: the client knows why
            self.running = False
            self.print_exception(e)
            kind, code = "error", 1
        finally:
            self.running = False
        if "matplotlib.pyplot" in sys.modules:
            try:
                self.show()
            except BaseException as e:
                self.print_exception(e)
        return kind, code

    def print_exception(self, e):
        """The traceback, without the kernel's own frames (none for a
        SyntaxError: the parser's are not the program's either)."""
        te = traceback.TracebackException(type(e), e, None if isinstance(e, SyntaxError)
                                          else e.__traceback__)
        todo, seen = [te], set()
        while todo:  # the chained ones' too
            t = todo.pop()
            if id(t) in seen:
                continue
            seen.add(id(t))
            t.stack = traceback.StackSummary.from_list(
                [f for f in t.stack if f.filename != KERNEL_FILE])
            todo += [c for c in (t.__cause__, t.__context__) if c is not None]
        sys.stderr.write("".join(te.format()))
        sys.stderr.flush()

    def value_text(self):
        if self.value is None:
            return None
        try:
            t = repr(self.value)
        except BaseException as e:
            t = "<repr failed: %s>" % type(e).__name__
        self.value = None
        b = t.encode("utf-8", "backslashreplace")
        if len(b) > VALUE_MAX:
            b = b[:VALUE_MAX].decode("utf-8", "ignore").encode("utf-8")
        return b

    # -- the loop -----------------------------------------------------------

    def on_int(self, signum, frame):
        if self.running:
            raise KeyboardInterrupt

    def set_stdio(self, i, o, e):
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except BaseException:
                pass
        os.dup2(i, 0)
        os.dup2(o, 1)
        os.dup2(e, 2)
        sys.stdin = open(0, "r", closefd=False, errors="surrogateescape")
        sys.stdout = open(1, "w", closefd=False, buffering=1, errors="backslashreplace")
        sys.stderr = open(2, "w", closefd=False, buffering=1, errors="backslashreplace")

    @staticmethod
    def step_env(d):
        """step/env: the step's environment, NUL-separated NAME=VALUE."""
        try:
            with open(os.path.join(d, "env"), "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return {}
        env = {}
        for kv in raw.split(b"\0"):
            k, sep, v = kv.partition(b"=")
            if sep and k:
                env[os.fsdecode(k)] = os.fsdecode(v)
        return env

    def step(self, seq):
        d = os.path.join(SESSION, "step")
        # Not an earlier step's, renamed in late: this step's or none.
        try:
            os.unlink(os.path.join(d, "value"))
        except FileNotFoundError:
            pass
        with open(os.path.join(d, "code"), "rb") as f:
            src = f.read()
        try:
            i = os.open(os.path.join(d, "stdin"), os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            i = os.open(os.devnull, os.O_RDONLY)
        # The client has the FIFOs open for reading: these do not block.
        o = os.open(os.path.join(d, "out"), os.O_WRONLY | os.O_NONBLOCK)
        e = os.open(os.path.join(d, "err"), os.O_WRONLY | os.O_NONBLOCK)
        for fd in (o, e):
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        env = self.step_env(d)
        self.set_stdio(i, o, e)
        for fd in (i, o, e):
            os.close(fd)
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            kind, code = self.run(seq, src)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        v = self.value_text()
        if v is not None:
            tmp = os.path.join(d, "value.tmp")
            with open(tmp, "wb") as f:
                f.write(v)
            os.rename(tmp, os.path.join(d, "value"))
        self.set_stdio(self.null, self.sinkw, self.sinkw)
        return kind, code

    def serve(self):
        lock = os.open(os.path.join(SESSION, "kernel.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            sys.exit(3)  # a kernel runs already
        ctl = os.open(os.path.join(SESSION, "ctl"), os.O_RDWR)
        ack = os.open(os.path.join(SESSION, "ack"), os.O_RDWR)

        def forked():
            # A child the program forks (multiprocessing) is not the kernel:
            # holding the lock, it would make a dead kernel look alive.
            for fd in (lock, ctl, ack):
                try:
                    os.close(fd)
                except OSError:
                    pass

        os.register_at_fork(after_in_child=forked)
        self.null = os.open(os.devnull, os.O_RDONLY)
        self.sinkw = self.sink()
        self.set_stdio(self.null, self.sinkw, self.sinkw)
        signal.signal(signal.SIGINT, self.on_int)
        sys.displayhook = self.displayhook
        self.backend()
        os.write(ack, b"READY %d\n" % os.getpid())
        buf = b""
        while True:
            try:
                b = os.read(ctl, 4096)
            except KeyboardInterrupt:
                continue
            if not b:
                return
            buf += b
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                parts = line.split()
                if len(parts) != 2 or parts[0] != b"RUN" or not parts[1].isdigit():
                    continue
                seq = int(parts[1])
                try:
                    kind, code = self.step(seq)
                except KeyboardInterrupt:
                    kind, code = "error", 130
                except Exception as e:
                    self.set_stdio(self.null, self.sinkw, self.sinkw)
                    os.write(ack, b"FAIL %d %s\n" % (seq, str(e).replace("\n", " ").encode()[:200]))
                    continue
                os.write(ack, b"DONE %d %s %d %d\n" % (seq, kind.encode(), code, self.take_dropped()))
                if kind == "exit":
                    os._exit(0)


if __name__ == "__main__":
    # The kernel's own directory (/airlock/bin) is not the program's.
    if sys.path and sys.path[0] == os.path.dirname(KERNEL_FILE):
        sys.path[0] = ""
    Kernel().serve()
