#!/usr/bin/env python3
"""The README's second section, "## Five minutes to a cluster", and then
its "## Sessions: CodeSession" commands on that install, as a new
user runs it on the real node: each command in a fresh shell (HOME, PATH
with kubectl and helm, TERM, and KUBECONFIG: the user's kubeconfig), in
this checkout, checked against what the README says it prints. TAP out,
for tests/run.sh's chart tier.

Two things differ from the README, both because of the test node, not
the chart (tests/cluster/README.md): `helm install` gets `-f VALUES
--wait`, VALUES being what test_install.c gives it too (this clone's
images, never pulled; the daemons on the host's network with the API
server's address, as the node has no service proxy; the node's log dir,
containerd socket and cgroup root; class names of their own), and NODE
is the node's name. Everything else is verbatim."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RELNS = "airlock-system"


def cluster_env():
    env = {}
    with open(os.path.join(TOP, ".cluster", "env")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                env[k] = v.strip('"')
    if "NODE_NAME" not in env:
        raise SystemExit("Bail out! the chart tier needs the gVisor node: NODE=1 tests/cluster/up.sh")
    return env


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
            if line.strip():
                cmd, _, comment = line.partition("   #")
                out.append((cmd.strip(), comment.strip()))
    return out


def image(ref):
    repo, _, tag = ref.rpartition(":")
    return '{repository: %s, tag: "%s", pullPolicy: Never}' % (repo, tag)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def values(ce, path):
    port = ce["APISERVER_URL"].rsplit(":", 1)[1]
    with open(path, "w") as f:
        f.write("image:\n  controller: %s\n  nodeAgent: %s\n" %
                (image(ce["CONTROLLER_IMAGE"]), image(ce["NODE_AGENT_IMAGE"])))
        f.write('apiServer: {host: 127.0.0.1, port: "%s"}\n' % port)
        f.write("controller: {replicas: 1, hostNetwork: true, metricsPort: %d, probePort: %d}\n"
                % (free_port(), free_port()))
        f.write("nodeAgent:\n  hostNetwork: true\n  metricsPort: %d\n  probePort: %d\n"
                "  hostPaths: {podLogs: %s, containerdSocket: %s, cgroup: /sys/fs/cgroup}\n"
                "  cgroupRoot: %s\n" % (free_port(), free_port(), ce["POD_LOGS_DIR"],
                                        ce["CONTAINERD_SOCK"], ce["CGROUP_ROOT"]))
        f.write("runtimeClass: {name: airlock-readme-gvisor}\n"
                "priorityClass: {name: airlock-readme-execution}\n")
        f.write("config:\n  profiles:\n")
        for name, ext, interp in (("python", "py", "python3"), ("node", "js", "node"),
                                  ("bash", "sh", "bash")):
            f.write("    %s: {image: %s, command: [/airlock/bin/run, %s, main.%s], "
                    "sourceFile: main.%s}\n" % (name, ce["RUNNER_%s_IMAGE" % name.upper()],
                                                interp, ext, ext))
        f.write("test: {image: %s}\n" % ce["RUNNER_PYTHON_IMAGE"])


def main():
    ce = cluster_env()
    helm = os.environ.get("HELM") or "helm"
    path = os.pathsep.join([os.path.dirname(ce["KUBECTL"]), os.path.dirname(os.path.abspath(helm)),
                            os.environ["PATH"]])
    shell_env = {"HOME": os.environ.get("HOME", "/root"), "PATH": path, "TERM": "dumb",
                 "KUBECONFIG": ce["KUBECONFIG_ADMIN"]}

    def fresh_shell(cmd, timeout=300):
        return subprocess.run(["bash", "--noprofile", "--norc", "-c", cmd], cwd=TOP,
                              env=shell_env, capture_output=True, text=True, timeout=timeout)

    def kubectl(*args):
        return subprocess.run([ce["KUBECTL"], "--kubeconfig", ce["KUBECONFIG_ADMIN"], *args],
                              capture_output=True, text=True, timeout=120)

    body = section(open(os.path.join(TOP, "README.md")).read(), "Five minutes to a cluster")
    cmds = commands(body)
    fd, vals = tempfile.mkstemp(prefix="airlock-readme-values-")
    os.close(fd)
    values(ce, vals)
    # An earlier install's namespace (test_install's) may still be going.
    for _ in range(240):
        if kubectl("get", "ns", RELNS).returncode != 0:
            break
        time.sleep(0.5)
    results = []
    try:
        for cmd, comment in cmds:
            run = cmd
            if cmd.startswith("helm install "):
                run = cmd + " -f %s --wait --timeout 180s" % vals
            run = re.sub(r"\bNODE\b", ce["NODE_NAME"], run)
            if cmd.startswith("kubectl get cx hello"):
                # The user looks again once it has run.
                kubectl("wait", "cx/hello", "--for=jsonpath={.status.phase}=Succeeded",
                        "--timeout=60s")
            r = fresh_shell(run)
            if cmd == "kubectl get cx":
                want = comment.split()
                got = r.stdout.splitlines()
                ok = r.returncode == 0 and len(got) == 2 and got[0].split() == want and \
                    got[1].split()[:2] == ["hello", "python"]
            elif cmd.startswith("kubectl get cx hello"):
                ok = r.returncode == 0 and r.stdout == "hello from python 3\n"
            elif cmd.startswith("bin/airlock run"):
                ok = r.returncode == 0 and r.stdout == "hi\n"
            elif cmd.startswith("kubectl apply"):
                ok = r.returncode == 0 and \
                    r.stdout == "codeexecution.airlock.dev/hello created\n"
            else:
                ok = r.returncode == 0
            results.append((ok, cmd, r))
        # "## Sessions: CodeSession", on the same install: its block as one
        # script (its lines share $s), in a fresh shell. The chart's agent
        # execs a step through containerd (no runsc given), not as the
        # other tiers' agents do.
        sess = section(open(os.path.join(TOP, "README.md")).read(), "Sessions: CodeSession")
        block = re.findall(r"^```sh\n(.*?)^```", sess, re.S | re.M)[0]
        lines = [l.partition("  #")[0].rstrip() for l in block.splitlines() if l.strip()]
        # The user looks again once its steps are counted: the session's
        # count is written just after a step's result (docs/sessions.md),
        # which the CLI has already returned with (a clean-clone CI saw
        # STEPS 1 once). As for `kubectl get cx hello` above.
        for i, l in enumerate(lines):
            if l.startswith("bin/airlock session ls"):
                lines.insert(i, "'%s' --kubeconfig '%s' wait codesession/\"$s\" "
                             "--for=jsonpath='{.status.executions}'=2 --timeout=30s "
                             ">/dev/null" % (ce["KUBECTL"], ce["KUBECONFIG_ADMIN"]))
                break
        script = "set -e\n" + "\n".join(lines)
        r = fresh_shell(script)
        out = r.stdout.splitlines()
        # The two steps print nothing and 42; ls its header and the row;
        # close how it ended.
        ok = r.returncode == 0 and len(out) == 4 and out[0] == "42" and \
            out[1].split() == ["NAME", "RUNTIME", "PHASE", "REASON", "STEPS", "AGE"] and \
            out[2].split()[1:3] == ["python", "Ready"] and out[2].split()[-2] == "2" and \
            out[3] == "Closed: closed by spec.close"
        results.append((ok, "the Sessions section's commands", r))
    finally:
        kubectl("delete", "cx", "hello", "--ignore-not-found", "--wait=true", "--timeout=60s")
        # And what `bin/airlock run` made (run-XXXXX, in default too): a
        # second run of this test on the same cluster would list it.
        kubectl("delete", "cx", "--all", "-n", "default", "--wait=true", "--timeout=60s")
        kubectl("delete", "codesessions", "--all", "-n", "default", "--wait=true",
                "--timeout=60s")
        subprocess.run([helm, "uninstall", "airlock", "-n", RELNS, "--wait"],
                       env=dict(os.environ, KUBECONFIG=ce["KUBECONFIG_ADMIN"]),
                       capture_output=True, timeout=300)
        kubectl("label", "node", ce["NODE_NAME"],
                "node-restriction.kubernetes.io/airlock-gvisor-")
        kubectl("delete", "ns", RELNS, "--wait=false")
        os.unlink(vals)
    print("1..%d" % len(results))
    for i, (ok, cmd, r) in enumerate(results, 1):
        print("%sok %d - README: %s" % ("" if ok else "not ", i, cmd))
        if not ok:
            for l in ("exit %d" % r.returncode, "stdout: " + r.stdout[-800:],
                      "stderr: " + r.stderr[-800:]):
                for x in l.splitlines():
                    print("# " + x)
    return 0 if all(ok for ok, _, _ in results) and len(results) == 7 else 1


if __name__ == "__main__":
    sys.exit(main())
