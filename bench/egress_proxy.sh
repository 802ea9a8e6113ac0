#!/usr/bin/env bash
# Benchmark (issue 32): what the egress proxy adds to one connection. One
# execution on the real gVisor node, with a profile that lists the same
# target twice: as a CIDR (reached directly: the execution's
# NetworkPolicy) and as a host name (reached through the proxy in the gate
# pod: its pass checked, the name looked up in its hosts file, the address
# checked, the TLS SNI peeked at and the tunnel spliced). Inside the
# sandbox, N of each, interleaved, a new connection each:
#
#   http direct   GET http://A:8080/
#   http proxy    GET http://allowed.test:8080/ through the proxy
#   tls direct    TLS handshake with A:8443 and a GET
#   tls proxy     CONNECT allowed.test:8443, TLS handshake, GET
#
# Times from the program's own clock (time.perf_counter), in one process:
# the baseline in the same run, on the same path but the proxy. The target
# and the gate pod run under runc, as the chart runs the gate under the
# cluster's default runtime. Not a test: it prints medians, p90 and the
# maximum and appends them to bench/RESULTS.md. Needs `make cluster-up
# NODE=1` (the node's RUNTIME_CLASS_NET and EGRESS_IMAGE) and `make`.
#
# usage: [BENCH_BIN=DIR] bench/egress_proxy.sh [N]   (default 200)
set -euo pipefail
n=${1:-200}
bin=${BENCH_BIN:-$(cd "$(dirname "$0")/.." && pwd)/bin}
. "$(dirname "$0")/lib.sh"
bench_need_node egress_proxy.sh
[ -n "${RUNTIME_CLASS_NET-}" ] && [ -n "${EGRESS_IMAGE-}" ] ||
	{ echo "bench/egress_proxy.sh: the node has no network RuntimeClass or no egress image" >&2; exit 1; }
ns=bench-proxy-$$
pids=()
trap bench_cleanup EXIT

bench_install
bench_runc_ns
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=allowed.test \
	-keyout "$work/k.pem" -out "$work/c.pem" 2>/dev/null
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/key"
k -n "$ns" create secret generic egress-key --from-file=key="$work/key" >/dev/null
k -n "$ns" create secret generic target-tls --from-file=c.pem="$work/c.pem" \
	--from-file=k.pem="$work/k.pem" >/dev/null
k -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: a}
spec:
  runtimeClassName: airlock-bench-runc
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 65532, fsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: serve
    image: $RUNNER_PYTHON_IMAGE
    command:
    - python3
    - -c
    - |
      import http.server, socketserver, ssl, threading
      class H(http.server.BaseHTTPRequestHandler):
          def do_GET(self):
              self.send_response(200); self.send_header('Content-Length', '2'); self.end_headers(); self.wfile.write(b'hi')
          def log_message(self, *a): pass
      class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
      h = S(('0.0.0.0', 8080), H); t = S(('0.0.0.0', 8443), H)
      c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain('/tls/c.pem', '/tls/k.pem')
      t.socket = c.wrap_socket(t.socket, server_side=True)
      threading.Thread(target=h.serve_forever, daemon=True).start()
      t.serve_forever()
    volumeMounts: [{name: tls, mountPath: /tls, readOnly: true}]
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
  volumes: [{name: tls, secret: {secretName: target-tls}}]
YAML
k -n "$ns" wait --for=condition=Ready pod/a --timeout=120s >/dev/null
a=$(k -n "$ns" get pod a -o jsonpath='{.status.podIP}')
# One name a line, the last ended too: Squid 5.7 skips a last line
# without its newline (seen: no-address after its DNS timeout).
printf '%s allowed.test\n' "$a" > "$work/hosts"
k -n "$ns" create configmap egress-hosts --from-file=hosts="$work/hosts" >/dev/null
bench_gate_pod "$(cat <<YAML
  - name: proxy
    image: $EGRESS_IMAGE
    env:
    - {name: EGRESS_KEY_FILE, value: /etc/airlock-egress/key}
    - {name: EGRESS_PORTS, value: "8080 8443"}
    - {name: EGRESS_DNS, value: 127.0.0.1}
    - {name: EGRESS_HOSTS_FILE, value: /etc/airlock-egress-hosts/hosts}
    - {name: EGRESS_EXEMPT_CIDRS, value: $a/32}
    readinessProbe: {tcpSocket: {port: 3128}, periodSeconds: 1}
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
    volumeMounts:
    - {name: run, mountPath: /run/airlock}
    - {name: key, mountPath: /etc/airlock-egress, readOnly: true}
    - {name: hosts, mountPath: /etc/airlock-egress-hosts, readOnly: true}
  volumes:
  - {name: run, emptyDir: {medium: Memory}}
  - {name: key, secret: {secretName: egress-key, defaultMode: 288}}
  - {name: hosts, configMap: {name: egress-hosts}}
YAML
)"
cat > "$work/config.yaml" <<YAML
networkRuntimeClassName: $RUNTIME_CLASS_NET
profiles:
  python-net:
    image: $RUNNER_PYTHON_IMAGE
    command: [/airlock/bin/run, python3, main.py]
    sourceFile: main.py
    network: {egress: [{cidr: $a/32, ports: [8080, 8443]}, {host: allowed.test, ports: [8080, 8443]}]}
YAML
ctl_flags=(--egress-key "$work/key")
bench_daemons "$bin" "$ns" --network-runtime-class "$RUNTIME_CLASS_NET" --iptables iptables

cat > "$work/main.py" <<'PY'
import base64, http.client, json, os, socket, ssl, sys, time, urllib.parse
n, a = int(sys.argv[1]), sys.argv[2]
u = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
auth = "Basic " + base64.b64encode(("%s:%s" % (u.username, u.password)).encode()).decode()
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
def get(s):
    s.sendall(b"GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
    r = b""
    while True:
        d = s.recv(4096)
        if not d: break
        r += d
    assert r.endswith(b"hi"), r[:80]
def http_direct():
    get(socket.create_connection((a, 8080), timeout=10))
def http_proxy():
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("GET", "http://allowed.test:8080/", headers={"Host": "allowed.test:8080",
                                                           "Proxy-Authorization": auth})
    assert c.getresponse().read() == b"hi"
    c.close()
def tls_direct():
    get(ctx.wrap_socket(socket.create_connection((a, 8443), timeout=10), server_hostname="allowed.test"))
def tls_proxy():
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall(("CONNECT allowed.test:8443 HTTP/1.1\r\nHost: allowed.test:8443\r\n"
               "Proxy-Authorization: %s\r\n\r\n" % auth).encode())
    assert b" 200 " in s.recv(4096)
    get(ctx.wrap_socket(s, server_hostname="allowed.test"))
cases = {"http direct": http_direct, "http proxy": http_proxy,
         "tls direct": tls_direct, "tls proxy": tls_proxy}
for f in cases.values():      # untimed: the first of each
    f()
res = {k: [] for k in cases}
for i in range(n):
    for k, f in cases.items():
        t = time.perf_counter(); f(); res[k].append(round((time.perf_counter() - t) * 1000, 2))
print(json.dumps(res))
PY
k config view --raw --minify -o json > "$work/kc.json"
python3 - "$n" "$work" "$ns" "$APISERVER_URL" "$top" "$a" <<'PY' || true
import json, sys
n, work, ns, url, top, a = int(sys.argv[1]), *sys.argv[2:7]
sys.path.insert(0, top + "/bench")
import lib
A = lib.Api(work, url)
t, st = A.cx(ns, "proxy", {"runtime": "python-net", "source": open(work + "/main.py").read(),
                           "args": [str(n), a], "timeoutSeconds": 600})
assert st["phase"] == "Succeeded", st
res = json.loads(st["stdout"])
q = lib.q
out = {k: [q(v, 50), q(v, 90), max(v), len(v)] for k, v in res.items()}
json.dump(out, open(work + "/out.json", "w"))
PY
[ -s "$work/out.json" ] || { k -n "$ns" logs gate -c proxy --tail 40 >&2; exit 1; }

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
python3 - "$work" "$n" "$cpu" "$mem" "$(date -u +%Y-%m-%d)" "$(git -C "$top" rev-parse --short HEAD)" <<'PY' | tee -a "$top/bench/RESULTS.md"
import json, sys
work, n, cpu, mem, day, commit = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
o = json.load(open(work + "/out.json"))
print("\n## bench/egress_proxy.sh, %s, %s (%s, %s), N=%d, a new connection each, "
      "from inside one gVisor sandbox\n" % (day, commit, cpu, mem, n))
print("| what | p50 ms | p90 ms | max ms | N |")
print("|---|---|---|---|---|")
for k in ("http direct", "http proxy", "tls direct", "tls proxy"):
    p50, p90, mx, cnt = o[k]
    print("| %s | %.1f | %.1f | %.1f | %d |" % (k, p50, p90, mx, cnt))
for k in ("http", "tls"):
    d, p = o[k + " direct"][0], o[k + " proxy"][0]
    print("\nAdded by the proxy, %s (p50): %.1f ms (ratio %.2f)" % (k, p - d, p / d))
PY
