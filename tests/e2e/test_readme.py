#!/usr/bin/env python3
"""The README's first section, as a new user runs it: every command of
"## Two commands" (but `make test`, which is what runs this), verbatim,
each in a fresh shell (no environment but HOME, PATH and TERM), in this
checkout, then checked against what the README says it prints. TAP out,
for tests/run.sh."""
import os
import re
import subprocess
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def section(text, title):
    m = re.search(r"^## %s\n(.*?)(?=^## )" % re.escape(title), text, re.S | re.M)
    if m is None:
        raise SystemExit("Bail out! README.md has no section %r" % title)
    return m.group(1)


def commands(body):
    """Each line of each ```sh block: (command, its comment)."""
    out = []
    for block in re.findall(r"^```sh\n(.*?)^```", body, re.S | re.M):
        for line in block.splitlines():
            if not line.strip():
                continue
            cmd, _, comment = line.partition("   #")
            out.append((cmd.strip(), comment.strip()))
    return out


def fresh_shell(cmd):
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": os.environ["PATH"],
           "TERM": "dumb"}
    return subprocess.run(["bash", "--noprofile", "--norc", "-c", cmd], cwd=TOP, env=env,
                          capture_output=True, text=True, timeout=900)


def main():
    readme = open(os.path.join(TOP, "README.md")).read()
    body = section(readme, "Two commands")
    cmds = [c for c in commands(body) if c[0] != "make test"]
    # What the README says each prints.
    demo_says = re.findall(r"^    (\S.*)$", body, re.M)[:2]
    checks = {
        "./demo.sh": lambda r: r.returncode == 0 and demo_says and all(
            l.split(":")[0] in (r.stdout + r.stderr) for l in demo_says) and
        "hello from gVisor: Linux" in r.stdout and "this line went to stderr" in r.stderr,
        "bin/airlock run --local -c 'print(6 * 7)'": lambda r: r.returncode == 0 and
        r.stdout == "42\n",
    }
    results = []
    for cmd, comment in cmds:
        # After ./demo.sh alone: it unpacks the python runner only, so a
        # command needing another (-r bash) fails on a fresh machine even
        # where this tier's cache has it (issue 29).
        m = re.search(r"(?:^|\s)(?:-r|--runtime)[ =](\S+)", cmd)
        if "--local" in cmd and m and m.group(1) != "python":
            results.append((False, cmd, subprocess.CompletedProcess(
                cmd, 1, "", "runtime %s: ./demo.sh unpacks python's root filesystem only"
                % m.group(1))))
            continue
        r = fresh_shell(cmd)
        check = checks.get(cmd)
        if check is None and re.fullmatch(r"\d+", comment):
            # "...; echo $?   # 124": the last line printed is that code.
            check = (lambda want: lambda r: r.stdout.strip().splitlines()[-1:] == [want])(
                comment)
        if check is None and "status object" in comment:
            check = lambda r: r.returncode == 0 and "phase: Succeeded" in r.stdout and \
                "stdoutTruncated: true" in r.stdout
        if check is None:
            check = lambda r: r.returncode == 0
        ok = bool(check(r))
        results.append((ok, cmd, r))
    print("1..%d" % len(results))
    for i, (ok, cmd, r) in enumerate(results, 1):
        print("%sok %d - README: %s" % ("" if ok else "not ", i, cmd))
        if not ok:
            for l in ("exit %d" % r.returncode, "stdout: " + r.stdout[-800:],
                      "stderr: " + r.stderr[-800:]):
                for x in l.splitlines():
                    print("# " + x)
    return 0 if all(ok for ok, _, _ in results) and len(results) >= 4 else 1


if __name__ == "__main__":
    sys.exit(main())
