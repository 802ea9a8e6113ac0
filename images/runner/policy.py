# /airlock/bin/policy.py - a profile's denyImports, enforced in the sandbox
# (README: security model; execution/ctl_config.h). The profile's command
# runs it in front of the program:
#
#   python3 -I /airlock/bin/policy.py DENIED[,DENIED...] PROGRAM [ARG...]
#
# Before anything of the program runs, an ast pass refuses an import of a
# denied module (or of anything under it: "os" denies "os.path") with its
# line. Then an audit hook (PEP 578; it cannot be removed) and a finder
# first on sys.meta_path (the hook puts it back if the program takes it
# away) refuse the imports that only happen at run time: __import__,
# importlib, exec of a string built by the program. A refusal is one line on stderr,
#
#   airlock: policy: import of 'subprocess' refused (main.py line 3)
#
# and exit 120, which the node agent reports as PolicyDenied.
#
# -I: no PYTHON* variables, no user site, and not the script's directory
# on sys.path, so nothing of the tenant's is imported before the hook is
# in; the program's own directory goes back on sys.path for the program,
# as `python3 PROGRAM` would have it.
#
# A denied module's own files (its source, its cached bytecode, every file
# of a denied package) are refused under any name: opened (exec of their
# text, SourceFileLoader, spec_from_file_location, runpy.run_path),
# compiled or run from code that names them, or loaded as an extension.
# Compared by device and inode, so a link to one is refused too.
#
# A guard against accidents and common misuse, not a boundary: a module
# that is allowed can do what a denied one does (os.system for
# subprocess, _posixsubprocess and _ctypes beneath subprocess and
# ctypes), a copy of a denied module's code that the program carries or
# builds, or reads another way (through a directory descriptor: the audit
# event names the file relative to it), is its own code, and gVisor
# remains the boundary.
import ast
import builtins
import importlib.util
import os
import sys

REFUSED = 120


def run(deny, prog, argv, preloaded=None):
    """Install the guard for the modules in deny (a set of names) and run
    prog as __main__ with sys.argv argv. Its own main() and the zygote's
    child (zygote.py) call it. preloaded: the denied modules the
    interpreter loaded before this guard, whose files stay readable (None:
    those in sys.modules now). Returns what the program's code returns;
    its exceptions propagate; a refusal is exit 120 here."""
    cwd = os.getcwd().rstrip("/") + "/"

    def denied(name):
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            if ".".join(parts[:i]) in deny:
                return True
        return False

    def refuse(name, where):
        try:
            sys.stdout.flush()      # what the program printed before
        except Exception:
            pass
        os.write(2, ("airlock: policy: import of '%s' refused (%s)\n" % (name, where))
                 .encode("utf-8", "replace"))
        os._exit(REFUSED)

    with open(prog, "rb") as f:
        src = f.read()
    try:
        tree = ast.parse(src, filename=prog)
    except (SyntaxError, ValueError):
        tree = None     # Python says what is wrong when it compiles it below
    if tree is not None:
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(node.lineno, a.name) for a in node.names if denied(a.name)]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if denied(node.module):
                    found.append((node.lineno, node.module))
                else:
                    found += [(node.lineno, node.module + "." + a.name)
                              for a in node.names if denied(node.module + "." + a.name)]
        if found:
            line, name = min(found)
            refuse(name, "%s line %d" % (prog, line))

    def where():
        # The innermost frame of the program's own files (relative, or in
        # its directory); else the innermost one not of the import system
        # nor this guard's.
        def outside(f):
            fn = f.f_code.co_filename
            return not (fn.startswith("<") or fn == me or "/importlib/" in fn)

        def own(f):
            fn = f.f_code.co_filename
            return outside(f) and (not fn.startswith("/") or fn.startswith(cwd))

        f = sys._getframe(2)
        while f is not None and not own(f):
            f = f.f_back
        if f is None:
            f = sys._getframe(2)
            while f is not None and not outside(f):
                f = f.f_back
        if f is None:
            return "at run time"
        fn = f.f_code.co_filename
        if fn.startswith(cwd):
            fn = fn[len(cwd):]
        return "at run time, %s line %d" % (fn, f.f_lineno)

    class Finder:
        # importlib.import_module and its kin go through sys.meta_path,
        # not through the import statement's path, which raises "import".
        @staticmethod
        def find_spec(name, path=None, target=None):
            if denied(name):
                refuse(name, where())
            return None

    finder = Finder()

    # The denied modules' files, found before anything of the program runs
    # (finding a dotted name imports its parent, as the program's import
    # would): (st_dev, st_ino) -> the module's name, and the directories
    # of denied packages, for files made in them since (bytecode). Not
    # those of a module the interpreter loaded before this guard (os, when
    # denied): their code is in memory already, and their files are what a
    # traceback through them reads.
    files, dirs = {}, []
    if preloaded is None:
        preloaded = frozenset(m for m in sys.modules if denied(m))

    def add_file(path, name):
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return
        files[(st.st_dev, st.st_ino)] = name

    for name in sorted(deny):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or name in preloaded:
            continue
        if spec.submodule_search_locations:
            for d in spec.submodule_search_locations:
                dirs.append((os.path.realpath(d) + "/", name))
                n = 0
                for top, _, names in os.walk(d):
                    for f in names:
                        if n < 10000:       # a package, not a file system
                            add_file(os.path.join(top, f), name)
                            n += 1
        elif spec.has_location and spec.origin:
            add_file(spec.origin, name)
            if spec.origin.endswith(".py"):
                for opt in ("", 1, 2):
                    try:
                        add_file(importlib.util.cache_from_source(
                            spec.origin, optimization=opt), name)
                    except (NotImplementedError, ValueError):
                        pass

    def file_of(path):
        # The denied module whose file path (str, bytes or PathLike) is,
        # or None.
        if isinstance(path, int) or path is None:
            return None
        try:
            st = os.stat(path)
        except (OSError, TypeError, ValueError):
            return None
        name = files.get((st.st_dev, st.st_ino))
        if name is None and dirs:
            try:
                real = os.path.realpath(os.fsdecode(path))
            except (TypeError, ValueError):
                return None
            for d, n in dirs:
                if real.startswith(d):
                    return n
        return name

    def hook(event, args):
        if event in ("open", "compile") and args:
            name = file_of(args[0] if event == "open" else args[1])
            if name is not None:
                refuse(name, where())
        elif event == "exec" and args:
            name = file_of(getattr(args[0], "co_filename", None))
            if name is not None:
                refuse(name, where())
        elif event == "import":
            if isinstance(args[0], str) and denied(args[0]):
                refuse(args[0], where())
            # An extension module loaded from a file: the file's.
            name = file_of(args[1]) if len(args) > 1 else None
            if name is not None:
                refuse(name, where())
            # Put back at the front if the program moved or removed it.
            if sys.meta_path[:1] != [finder]:
                try:
                    sys.meta_path.remove(finder)
                except ValueError:
                    pass
                sys.meta_path.insert(0, finder)

    # A denied module loaded already (by the interpreter's start, or by
    # this guard) is loaded anew when imported, so that the hook sees it.
    for name in [m for m in sys.modules if denied(m)]:
        del sys.modules[name]
    me = __file__
    sys.meta_path.insert(0, finder)
    sys.addaudithook(hook)

    def excepthook(t, v, tb):
        # The program's traceback, without this guard's frames.
        while tb is not None and tb.tb_frame.f_code.co_filename == me:
            tb = tb.tb_next
        sys.__excepthook__(t, v.with_traceback(tb) if v is not None else v, tb)
    sys.excepthook = excepthook

    code = compile(src, prog, "exec")
    main_mod = type(sys)("__main__")
    main_mod.__file__ = prog
    main_mod.__builtins__ = builtins
    sys.modules["__main__"] = main_mod
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(prog)))

    exec(code, main_mod.__dict__)


def main():
    if len(sys.argv) < 3:
        sys.stderr.write("policy.py: usage: policy.py DENIED[,DENIED...] PROGRAM [ARG...]\n")
        os._exit(125)
    run(frozenset(m for m in sys.argv[1].split(",") if m), sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
