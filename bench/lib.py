"""bench/lib.py - what the Python parts of bench/e2e.sh and bench/warm.sh
share: the API server over HTTPS with the admin kubeconfig (no client
library: the request and the watch are timed as they are made), a Job as
the baseline, bench/cri_floor.c on the node, and the quantiles.

    import sys; sys.path.insert(0, BENCH_DIR); import lib
    api = lib.Api(work, url)
"""
import base64, glob, http.client, json, os, signal, ssl, subprocess, time, urllib.parse


class Api:
    def __init__(self, work, url):
        kc = json.load(open(work + "/kc.json"))
        u, cl = kc["users"][0]["user"], kc["clusters"][0]["cluster"]
        for f, key in (("crt", u["client-certificate-data"]), ("key", u["client-key-data"]),
                       ("ca", cl["certificate-authority-data"])):
            open("%s/%s.pem" % (work, f), "wb").write(base64.b64decode(key))
        self.ctx = ssl.create_default_context(cafile=work + "/ca.pem")
        self.ctx.load_cert_chain(work + "/crt.pem", work + "/key.pem")
        self.host = urllib.parse.urlparse(url)
        self.c = self.conn()

    def conn(self):
        return http.client.HTTPSConnection(self.host.hostname, self.host.port, context=self.ctx)

    def req(self, method, path, body=None, c=None, ctype="application/json"):
        c = c or self.c
        c.request(method, path, json.dumps(body) if body is not None else None,
                  {"Content-Type": ctype})
        r = c.getresponse()
        data = r.read()
        if r.status >= 300:
            raise SystemExit("%s %s: HTTP %d %s" % (method, path, r.status, data[:300]))
        return data

    def get(self, path):
        return json.loads(self.req("GET", path))

    def cx(self, ns, name, spec, end=("Succeeded", "Failed", "TimedOut", "Cancelled")):
        """Create CodeExecution name in ns and watch it to one of end:
        (seconds from the create to that event, its status)."""
        g = "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutions" % ns
        t0 = time.monotonic()
        self.req("POST", g, {"apiVersion": "airlock.dev/v1alpha1", "kind": "CodeExecution",
                             "metadata": {"name": name}, "spec": spec})
        o = self.watch_until(g + "?watch=1&fieldSelector=metadata.name%%3D%s" % name,
                             lambda o: o.get("status", {}).get("phase") in end)
        return time.monotonic() - t0, o["status"]

    def pod_memory(self, ns, pod, cgroot):
        """Pod's cgroup on the node (memory v1): usage and rss, bytes."""
        uid = self.get("/api/v1/namespaces/%s/pods/%s" % (ns, pod))["metadata"]["uid"]
        d = glob.glob("/sys/fs/cgroup/memory%s/kubepods/**/pod%s" % (cgroot, uid),
                      recursive=True)
        assert len(d) == 1, d
        usage = int(open(d[0] + "/memory.usage_in_bytes").read())
        stat = dict(l.split() for l in open(d[0] + "/memory.stat"))
        return usage, int(stat["total_rss"])

    def watch_until(self, path, done, opened=None):
        """Stream a watch until done(obj) is true; that object. opened():
        called once the API server has answered (the watch is set up)."""
        c = self.conn()
        c.request("GET", path)
        r = c.getresponse()
        if opened:
            opened()
        buf = b""
        while True:
            chunk = r.read1(65536)
            if not chunk:
                raise SystemExit("watch ended: " + path)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                ev = json.loads(line)
                if done(ev["object"]):
                    c.close()
                    return ev["object"]

    @staticmethod
    def _pod_spec(image, runtime_class):
        return {"restartPolicy": "Never", "runtimeClassName": runtime_class,
                "automountServiceAccountToken": False,
                "containers": [{"name": "run", "image": image, "imagePullPolicy": "Never",
                                "command": ["python3", "-c", "print(1)"],
                                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"},
                                              "limits": {"cpu": "500m", "memory": "256Mi"}}}]}

    def run_pod(self, ns, name, image, runtime_class="gvisor"):
        """A plain Pod, print(1): create -> Succeeded -> logs read, in
        seconds, no controller between; the Pod deleted after, untimed."""
        podp = "/api/v1/namespaces/%s/pods" % ns
        t0 = time.monotonic()
        self.req("POST", podp, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                "spec": self._pod_spec(image, runtime_class)})
        o = self.watch_until("%s?watch=1&fieldSelector=metadata.name%%3D%s" % (podp, name),
                             lambda o: o.get("status", {}).get("phase") in ("Succeeded", "Failed"))
        out = self.req("GET", "%s/%s/log" % (podp, name))
        t = time.monotonic() - t0
        assert o["status"]["phase"] == "Succeeded" and out == b"1\n", (o["status"], out)
        self.req("DELETE", "%s/%s" % (podp, name))
        return t

    def run_job(self, ns, name, image, runtime_class="gvisor"):
        """A plain Job, print(1): create -> complete -> logs read, in
        seconds; the Job deleted after, untimed."""
        jobp = "/apis/batch/v1/namespaces/%s/jobs" % ns
        t0 = time.monotonic()
        self.req("POST", jobp, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": self._pod_spec(image, runtime_class)}}})
        self.watch_until("%s?watch=1&fieldSelector=metadata.name%%3D%s" % (jobp, name),
                         lambda o: o.get("status", {}).get("succeeded", 0) >= 1 or
                         o.get("status", {}).get("failed", 0) >= 1)
        pods = self.get("/api/v1/namespaces/%s/pods?labelSelector=job-name%%3D%s" % (ns, name))
        pod = pods["items"][0]["metadata"]["name"]
        out = self.req("GET", "/api/v1/namespaces/%s/pods/%s/log" % (ns, pod))
        t = time.monotonic() - t0
        assert out == b"1\n", out
        self.req("DELETE", "%s/%s?propagationPolicy=Background" % (jobp, name))
        return t


def cri_floor_run(cri_floor, sock, image, work, kubelet, *opts):
    """bench/cri_floor.c on the node's containerd, running print(1); its
    fields, the exit and output checked. The kubelet kills, at its next
    housekeeping, a running sandbox it has no pod for: paused for the
    tool's run, and only then."""
    os.kill(kubelet, signal.SIGSTOP)
    try:
        out = subprocess.run([cri_floor, *opts, sock, "runsc", image, work + "/cri-logs",
                              "python3", "-c", "print(1)"], capture_output=True,
                             check=True, text=True).stdout.split()
    finally:
        os.kill(kubelet, signal.SIGCONT)
    f = dict(x.split("=", 1) for x in out)
    assert f["exit"] == "0" and f["stdout"] == '"1\\n"', out
    return f


def idle_ready(p):
    """Pod p is a pool's holder, unclaimed, not going, running and ready."""
    md, st = p["metadata"], p.get("status", {})
    cs = (st.get("containerStatuses") or [{}])[0]
    return ("airlock.dev/pool-uid" in md.get("labels", {}) and
            "airlock.dev/execution-uid" not in md.get("labels", {}) and
            "deletionTimestamp" not in md and st.get("phase") == "Running" and
            "running" in cs.get("state", {}) and cs.get("ready") is True)


def q(v, p):
    """The p-th percentile of v, nearest rank."""
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def busy(ms=300):
    """The machine's CPU busy fraction over the next ms (/proc/stat)."""
    def read():
        v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t1, i1 = read()
    time.sleep(ms / 1000)
    t2, i2 = read()
    return 1 - (i2 - i1) / max(1, t2 - t1)


def quiet(unquiet):
    """Untimed: the node quiet (at most 25% busy over 300 ms), at most
    15 s: a cold sample's sandbox is still torn down on the node after its
    pod is gone from the API, and a holder starts its interpreter after
    the pod reads ready. Not quiet then: the sample runs, and is counted
    (a 1 appended to the list unquiet)."""
    t0 = time.monotonic()
    while busy() > 0.25:
        if time.monotonic() - t0 > 15:
            unquiet.append(1)
            return
