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
# A guard against accidents and common misuse, not a boundary: a module
# that is allowed can do what a denied one does (os.system for
# subprocess), and gVisor remains the boundary.
import ast
import os
import sys

REFUSED = 120


def main():
    if len(sys.argv) < 3:
        sys.stderr.write("policy.py: usage: policy.py DENIED[,DENIED...] PROGRAM [ARG...]\n")
        os._exit(125)
    deny = frozenset(m for m in sys.argv[1].split(",") if m)
    prog = sys.argv[2]
    cwd = os.getcwd().rstrip("/") + "/"
    argv = sys.argv[2:]

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
        # The innermost frame of the program's (not the import system's,
        # not this guard's).
        f = sys._getframe(2)
        while f is not None and (f.f_code.co_filename.startswith("<") or
                                 f.f_code.co_filename == me or
                                 "/importlib/" in f.f_code.co_filename):
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

    def hook(event, args):
        if event == "import":
            if isinstance(args[0], str) and denied(args[0]):
                refuse(args[0], where())
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
    main_mod.__builtins__ = __builtins__
    sys.modules["__main__"] = main_mod
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(prog)))

    exec(code, main_mod.__dict__)


main()
