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
# Libraries (issue 31): the program's reach is what is refused. A library
# the program imports may import a denied module while it is itself being
# imported (pandas' `import subprocess`); once the program's import has
# run, the module is taken out of sys.modules, so the program's own
# import of it, and a library's import of it made later on the program's
# behalf, are refused as when nothing had loaded it. The ast pass also
# refuses the program's text naming one through a module it imported
# (`from matplotlib import subprocess`, `matplotlib.subprocess`, a literal
# getattr) or using one's name it never binds (`from M import *`). A
# library module is one whose body runs from the interpreter's library
# directories, as sys.modules has it. A denied module taken back is kept
# and given to the next library that imports it. A denied module's file
# read or compiled to show a traceback (the guard's excepthook, the
# traceback module) is allowed.
#
# A guard against accidents and common misuse, not a boundary: a module
# that is allowed can do what a denied one does (os.system for
# subprocess, _posixsubprocess and _ctypes beneath subprocess and
# ctypes), a copy of a denied module's code that the program carries or
# builds, or reads another way (through a directory descriptor: the audit
# event names the file relative to it), is its own code, and gVisor
# remains the boundary.
import _thread
import ast
import builtins
import importlib.util
import os
import sys

REFUSED = 120


def submodule(parent, name, seen={}):
    """Is parent.name a module of parent's own (scipy.signal, asyncio's
    subprocess), found by its files, without importing anything: then it
    is not the denied module of that name."""
    key = parent + "." + name
    if key not in seen:
        found = False
        parts = parent.split(".")
        try:
            spec = importlib.util.find_spec(parts[0])   # top level: imports nothing
        except (ImportError, ValueError):
            spec = None
        dirs = list(spec.submodule_search_locations or []) if spec else []
        for p in parts[1:]:
            dirs = [os.path.join(d, p) for d in dirs if os.path.isdir(os.path.join(d, p))]
        for d in dirs:
            try:
                names = os.listdir(d)
            except OSError:
                continue
            if name in names or any(f.split(".")[0] == name and
                                    (f.endswith(".py") or f.endswith(".so"))
                                    for f in names):
                found = True
        seen[key] = found
    return seen[key]


def reach(tree, deny, denied):
    """What the program's text reaches of the denied modules by name:
    [(line, module)]. Its imports (`import M`, `from M import N`: M or
    M.N denied); a name imported from a module that is a denied module's
    (`from matplotlib import subprocess`); an attribute of a module it
    imported that names one (`matplotlib.subprocess`, `pd.io.common.os`
    with os denied, `os.path` with os.path denied), or getattr of such a
    module with that name as a literal; and a denied module's name used
    and never bound by the program (what `from M import *` brought). A
    module of the library's own with that name (scipy.signal with signal
    denied, asyncio.subprocess) is not the denied one."""
    top = frozenset(m for m in deny if "." not in m)
    bound = {}          # a name the program's imports bind -> its module
    stored = set()      # every name the program binds otherwise
    found = []

    def hit(parent, attr):
        return attr in top and not submodule(parent, attr)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if denied(a.name):
                    found.append((node.lineno, a.name))
                if a.asname:
                    bound[a.asname] = a.name
                else:
                    bound[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if denied(node.module):
                found.append((node.lineno, node.module))
                continue
            for a in node.names:
                full = node.module + "." + a.name
                if denied(full) or hit(node.module, a.name):
                    found.append((node.lineno, full if denied(full) else a.name))
                bound[a.asname or a.name] = full
        elif isinstance(node, ast.ImportFrom):
            stored.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stored.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, ast.arg):
            stored.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            stored.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            stored.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            stored.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            stored.add(node.rest)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            attrs = []
            v = node
            while isinstance(v, ast.Attribute):
                attrs.append(v.attr)
                v = v.value
            if isinstance(v, ast.Name) and v.id in bound:
                attrs.reverse()
                chain = [bound[v.id]] + attrs
                for i in range(1, len(chain)):
                    if hit(".".join(chain[:i]), chain[i]):
                        found.append((node.lineno, chain[i]))
                        break
                else:
                    if denied(".".join(chain)):
                        found.append((node.lineno, ".".join(chain)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and
              node.func.id == "getattr" and len(node.args) >= 2 and
              isinstance(node.args[0], ast.Name) and node.args[0].id in bound and
              isinstance(node.args[1], ast.Constant) and
              isinstance(node.args[1].value, str) and
              hit(bound[node.args[0].id], node.args[1].value)):
            found.append((node.lineno, node.args[1].value))
        elif (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and
              node.id in top and node.id not in bound and node.id not in stored):
            found.append((node.lineno, node.id))
    return found


def run(deny, prog, argv, preloaded=None, taken=None):
    """Install the guard for the modules in deny (a set of names) and run
    prog as __main__ with sys.argv argv. Its own main() and the zygote's
    child (zygote.py) call it. preloaded: the denied modules the
    interpreter loaded before this guard, whose files stay readable (None:
    those in sys.modules now). taken: denied modules the caller took out
    of sys.modules ({name: module}), handed back to a library that
    imports one. Returns what the program's code returns;
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
        found = reach(tree, deny, denied)
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

    # The interpreter's library directories, as at the start (-I: no
    # PYTHONPATH): a library's module comes from one of them.
    roots = tuple(sorted({r for p in sys.path if p and os.path.isabs(p) and
                          not (p.rstrip("/") + "/").startswith(cwd)
                          for r in (p.rstrip("/") + "/", os.path.realpath(p) + "/")}))

    def module_body(f):
        # Is frame f a library module's body being imported (its spec
        # _initializing) or reloaded (under importlib's _exec): the module
        # of that name in sys.modules, its globals the frame's, its file
        # the frame's, and that file in a library directory?
        spec = f.f_globals.get("__spec__")
        fn = f.f_code.co_filename
        if (spec is None or getattr(spec, "origin", None) != fn or
                not fn.startswith(roots)):
            return False
        m = sys.modules.get(getattr(spec, "name", None))
        if m is None or getattr(m, "__dict__", None) is not f.f_globals:
            return False
        if getattr(spec, "_initializing", False):
            return True
        b = f.f_back
        for _ in range(4):
            if b is None:
                return False
            if b.f_code.co_name == "_exec" and b.f_code.co_filename.startswith("<frozen"):
                return True
            b = b.f_back
        return False

    def library_import():
        # Is this a library's own import, made while it is itself being
        # imported (pandas' `import subprocess` under the program's
        # `import pandas`)? Outward from the guard's caller, the first
        # frame that decides: a library module's body being imported
        # (module_body): yes; a frame of the program's own files: no;
        # none: no. A library's function called by the program
        # (pydoc.locate, runpy) is not its import.
        f = sys._getframe(1)
        while f is not None:
            fn = f.f_code.co_filename
            if not (fn.startswith("<") or fn == me or "/importlib/" in fn):
                if not fn.startswith("/") or fn.startswith(cwd):
                    return False
                if f.f_code.co_name == "<module>" and module_body(f):
                    return True
            f = f.f_back
        return False

    formatting = [False]    # the guard's excepthook is printing a traceback

    def traceback_read():
        # A file read to show a traceback's lines (one through a denied
        # module's frames: subprocess raising for pandas): while the
        # guard's excepthook prints one, or by the traceback module
        # (traceback.print_exc) through linecache.
        if formatting[0]:
            return True
        f, n = sys._getframe(1), 0
        while f is not None and n < 6:
            fn = f.f_code.co_filename
            if fn == traceback_py:
                return True
            if not (fn.startswith("<") or fn == me):
                n += 1
            f = f.f_back
        return False

    # Denied modules a library loaded (library_import), by the thread that
    # imported them: taken out of sys.modules once the import the program
    # made there (the outermost, `import pandas`) has run its module's
    # body, so that the program's own import of one is refused as when
    # nothing had loaded it. The library keeps what it bound; the module
    # is kept here and handed back to the next library that imports it
    # (one subprocess, one CalledProcessError), never to the program.
    lent = {}           # thread id -> names
    stash = {}          # name -> the module taken back

    def lend(name):
        lent.setdefault(_thread.get_ident(), set()).add(name)

    def take_back():
        names = lent.pop(_thread.get_ident(), ())
        for name in names:
            m = sys.modules.get(name)
            if m is None:
                continue
            if getattr(getattr(m, "__spec__", None), "_initializing", False):
                lend(name)      # still being imported (another thread's)
                continue
            stash[name] = sys.modules.pop(name)

    class Stashed:
        # The loader that hands a library the module taken back before,
        # its own spec put back on it.
        def __init__(self, module):
            self.module = module
            self.spec = module.__spec__

        def create_module(self, spec):
            return self.module

        def exec_module(self, module):
            module.__spec__ = self.spec

    class Outermost:
        # The loader of a module the program itself imports: the real
        # one's exec_module, then take_back. The module and its spec get
        # the real loader back before its body runs.
        def __init__(self, real):
            self.real = real

        def create_module(self, spec):
            return self.real.create_module(spec)

        def exec_module(self, module):
            spec = module.__spec__
            if spec is not None and spec.loader is self:
                spec.loader = self.real
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self.real
            try:
                self.real.exec_module(module)
            finally:
                take_back()

        def __getattr__(self, name):
            if name == "real":      # not set yet (a copy): no recursion
                raise AttributeError(name)
            return getattr(self.real, name)

    def importing():
        # Called by the import statement's machinery (importlib's
        # _find_and_load_unlocked), not by importlib.util.find_spec.
        f = sys._getframe(2)
        for _ in range(6):
            if f is None:
                return False
            if (f.f_code.co_name == "_find_and_load_unlocked" and
                    f.f_code.co_filename.startswith("<frozen")):
                return True
            f = f.f_back
        return False

    class Finder:
        # importlib.import_module and its kin go through sys.meta_path,
        # not through the import statement's path, which raises "import".
        @staticmethod
        def find_spec(name, path=None, target=None):
            lib = library_import()
            if denied(name):
                if not lib:
                    refuse(name, where())
                if not importing():
                    return None
                lend(name)
                m = stash.pop(name, None)
                if m is not None:
                    return importlib.util.spec_from_loader(name, Stashed(m))
                return None
            if lib or not importing():
                return None
            # The program's own import: found here, so that its loader
            # can take back what the libraries under it loaded.
            for f in sys.meta_path:
                if f is finder or not hasattr(f, "find_spec"):
                    continue
                spec = f.find_spec(name, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = Outermost(spec.loader)
                    return spec
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

    def check(name):
        # A denied module (or its file) reached: refused, but for a
        # library's own import of it.
        if name is not None and not library_import():
            refuse(name, where())

    def hook(event, args):
        if event in ("open", "compile") and args:
            name = file_of(args[0] if event == "open" else args[1])
            if name is not None and not traceback_read():
                check(name)
        elif event == "exec" and args:
            check(file_of(getattr(args[0], "co_filename", None)))
        elif event == "import":
            if isinstance(args[0], str) and denied(args[0]):
                check(args[0])
            # An extension module loaded from a file: the file's.
            check(file_of(args[1]) if len(args) > 1 else None)
            # Put back at the front if the program moved or removed it.
            if sys.meta_path[:1] != [finder]:
                try:
                    sys.meta_path.remove(finder)
                except ValueError:
                    pass
                sys.meta_path.insert(0, finder)

    # A denied module loaded already (by the interpreter's start, or by
    # this guard) is taken out of sys.modules, so that the program's
    # import of it is seen and refused; kept (stash): a library that
    # imports one gets that copy back.
    for name in [m for m in sys.modules if denied(m)]:
        stash[name] = sys.modules.pop(name)
    stash.update(taken or {})
    me = __file__
    import traceback
    traceback_py = traceback.__file__
    sys.meta_path.insert(0, finder)
    sys.addaudithook(hook)

    def excepthook(t, v, tb):
        # The program's traceback, without this guard's frames.
        while tb is not None and tb.tb_frame.f_code.co_filename == me:
            tb = tb.tb_next
        formatting[0] = True
        try:
            sys.__excepthook__(t, v.with_traceback(tb) if v is not None else v, tb)
        finally:
            formatting[0] = False
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
