"""bench/hostile.py - bench/hostile.sh's attacks, as a tenant makes them
(issue 27), over HTTPS with the admin kubeconfig (bench/lib.py):

    hostile.py WORK URL pools NS N BYTES   N pools, each a BYTES annotation:
                                           "tried admitted refused"
    hostile.py WORK URL cx NS N            N executions with 1800 labels and
                                           a 250 KB annotation, an hour's
                                           timeout: "made BYTES-each"
    hostile.py WORK URL waiting NS         how many wait on the pods quota
    hostile.py WORK URL victim NS NAME     one small execution: ms from its
                                           create to its pod named in status
"""
import concurrent.futures, json, sys, threading, time

sys.path.insert(0, sys.path[0])
import lib

work, url, what = sys.argv[1], sys.argv[2], sys.argv[3]
api = lib.Api(work, url)
local = threading.local()
CX = "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutions"
POOLS = "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutionpools"


def post(path, body):
    """POST from this thread's own connection: the HTTP status."""
    if not hasattr(local, "c"):
        local.c = api.conn()
    local.c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = local.c.getresponse()
    r.read()
    return r.status


def labels():
    return {"tenant.example/l-%04d" % i: "v" * 63 for i in range(1800)}


if what == "pools":
    ns, n, size = sys.argv[4], int(sys.argv[5]), int(sys.argv[6])

    def one(i):
        return post(POOLS % ns, {"apiVersion": "airlock.dev/v1alpha1", "kind": "CodeExecutionPool",
                                 "metadata": {"name": "p-%05d" % i, "annotations": {"x": "a" * size}},
                                 "spec": {"runtime": "python", "replicas": 1}})
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        codes = list(ex.map(one, range(n)))
    print(n, codes.count(201), sum(1 for c in codes if c != 201))
elif what == "cx":
    ns, n = sys.argv[4], int(sys.argv[5])
    body = {"apiVersion": "airlock.dev/v1alpha1", "kind": "CodeExecution",
            "metadata": {"labels": labels(), "annotations": {"x": "a" * 250000}},
            "spec": {"runtime": "python", "source": "print(1)", "timeoutSeconds": 3600}}

    def one(i):
        b = dict(body, metadata=dict(body["metadata"], name="h-%05d" % i))
        return post(CX % ns, b)
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        codes = list(ex.map(one, range(n)))
    if codes.count(201) != n:
        raise SystemExit("hostile.py: %d of %d executions made: %s" % (codes.count(201), n, sorted(set(codes))))
    print(n, len(json.dumps(body)))
elif what == "waiting":
    ns, cont, n = sys.argv[4], "", 0
    while True:
        page = api.get((CX % ns) + "?limit=20" + ("&continue=" + cont if cont else ""))
        for o in page["items"]:
            conds = o.get("status", {}).get("conditions", [])
            n += any(c["type"] == "Scheduled" and c.get("reason") == "QuotaExceeded" for c in conds)
        cont = page["metadata"].get("continue")
        if not cont:
            break
    print(n)
elif what == "victim":
    ns, name = sys.argv[4], sys.argv[5]
    t0 = time.monotonic()
    api.req("POST", CX % ns, {"apiVersion": "airlock.dev/v1alpha1", "kind": "CodeExecution",
                              "metadata": {"name": name}, "spec": {"runtime": "python", "source": "print(1)"}})
    try:
        api.watch_until((CX % ns) + "?watch=1&timeoutSeconds=30&fieldSelector=metadata.name%3D" + name,
                        lambda o: o.get("status", {}).get("podName"))
        print("%.0f" % ((time.monotonic() - t0) * 1000))
    except SystemExit:
        print(">30000")
