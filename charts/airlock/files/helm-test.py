# helm test: create one CodeExecution as the tenant, wait for its end,
# check the result. The API server's address, the token and the CA are
# the pod's own (in-cluster), so this proves a tenant holding only
# airlock-editor can run code.
import http.client, json, os, ssl, sys, time

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
ns = open(SA + "/namespace").read()
token = open(SA + "/token").read()
ctx = ssl.create_default_context(cafile=SA + "/ca.crt")
host, port = os.environ["KUBERNETES_SERVICE_HOST"], int(os.environ["KUBERNETES_SERVICE_PORT"])
runtime, timeout = os.environ["RUNTIME"], int(os.environ["TIMEOUT"])
programs = {
    "python": 'print("airlock helm test")',
    "node": 'console.log("airlock helm test")',
    "bash": 'echo "airlock helm test"',
}
path = "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutions" % ns

def call(method, url, body=None):
    c = http.client.HTTPSConnection(host, port, context=ctx, timeout=30)
    c.request(method, url, json.dumps(body) if body is not None else None,
              {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status >= 300:
        sys.exit("%s %s: HTTP %d: %s" % (method, url, r.status, data[:500].decode(errors="replace")))
    return json.loads(data)

call("POST", path, {"apiVersion": "airlock.dev/v1alpha1", "kind": "CodeExecution",
                    "metadata": {"name": "helm-test"},
                    "spec": {"runtime": runtime, "source": programs[runtime], "timeoutSeconds": 30}})
end = time.time() + timeout
while True:
    st = call("GET", path + "/helm-test").get("status", {})
    if st.get("phase") in ("Succeeded", "Failed", "TimedOut", "Cancelled"):
        break
    if time.time() > end:
        sys.exit("no result after %d s: %s" % (timeout, json.dumps(st)))
    time.sleep(0.5)
print(json.dumps({k: st.get(k) for k in ("phase", "reason", "exitCode", "stdout", "stderr",
                                          "durationMillis", "nodeName")}))
if st.get("phase") != "Succeeded" or st.get("exitCode") != 0 or \
        st.get("stdout") != "airlock helm test\n" or st.get("stderr") != "":
    sys.exit("unexpected result")
call("DELETE", path + "/helm-test")
print("ok")
