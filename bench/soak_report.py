"""bench/soak_report.py WORK - the account of bench/soak.sh: what became of
each execution, printed as the Markdown report; exits 1 if the soak failed.

WORK holds what soak.sh gathered:
  meta.json    n, lost_node, t0, t_made, t_drained, faults (a list),
               running_at_restart, controller_node, cores, kernel,
               rss: {controller: [before, after], controller_pids: [before,
               after], agents: {node: kB at the end}}
  cx.json      the namespace's executions (kubectl get cx -o json)
  events.json  the namespace's Events
  left.txt     one line for each thing left behind
  windows.txt  "NODE FROM TO" a line: a node's fault windows (containerd or
               the kubelet restarted, the node lost), wall-clock seconds

The soak fails when any of these is not 0: wrong, lost (never ended, or a
program that exited whose result was lost: "the program exited ..." is
never excused), run twice, Pending past the start deadline, left behind;
when an excused bucket holds more than 5% of N; or when the controller's
RSS grew more than 20%.
"""
import collections, datetime, json, sys

START_DEADLINE = 120          # the chart's controller.startDeadlineSeconds
SLACK = 30                    # the controller's queue, a restart in between
CAP_PERCENT = 5
RSS_GROWTH = 20


def ts(s):
    if not s:
        return None
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def condition(st, kind):
    for c in st.get("conditions") or []:
        if c.get("type") == kind:
            return c
    return {}


def pending_too_long(cx, st, drained):
    """Seconds it stayed Pending, with no start, past the start deadline
    and its slack, or None. From the moment its pod was bound to a node
    (the Scheduled condition turned True), else its creation: the time it
    waited for room (Unschedulable) is not the start deadline's."""
    sched = condition(st, "Scheduled")
    ref = ts(sched.get("lastTransitionTime")) if sched.get("status") == "True" else None
    ref = ref or ts(cx["metadata"]["creationTimestamp"])
    start = ts(st.get("startTime"))
    if start is not None:
        waited = start - ref
    elif st.get("phase") in ("Succeeded", "Failed", "TimedOut", "Cancelled"):
        waited = (ts(st.get("completionTime")) or drained) - ref
    else:
        waited = drained - ref
    return waited if waited > START_DEADLINE + SLACK else None


def read(path):
    with open(path) as f:
        return f.read()


def account(work):
    meta = json.loads(read(work + "/meta.json"))
    n = int(meta["n"])
    lost_node = meta["lost_node"]
    items = json.loads(read(work + "/cx.json"))["items"]
    ev = json.loads(read(work + "/events.json"))["items"]
    left = [l for l in read(work + "/left.txt").split("\n") if l]
    windows = collections.defaultdict(list)
    for line in read(work + "/windows.txt").split("\n"):
        if line.strip():
            node, a, b = line.split()
            windows[node].append((float(a), float(b)))

    def in_fault(cx, st):
        start = ts(st.get("startTime")) or ts(cx["metadata"]["creationTimestamp"])
        end = ts(st.get("completionTime"))
        return any(end is not None and end >= a - 2 and start <= b + 30
                   for a, b in windows.get(st.get("nodeName"), []))

    ok = collections.Counter()
    bad, lost_data, not_ended, pending = [], [], [], []
    # The excused buckets, each capped at CAP_PERCENT of n.
    buckets = collections.OrderedDict((k, []) for k in ("capacity", "flagged", "faulted", "nodelost"))
    for cx in items:
        name = cx["metadata"]["name"]
        kind = cx["metadata"].get("labels", {}).get("soak-kind", "?")
        st = cx.get("status") or {}
        ph, rs, out = st.get("phase"), st.get("reason"), st.get("stdout", "")
        msg = st.get("message", "")
        node = st.get("nodeName")
        capacity = rs == "Unschedulable" or (ph == "TimedOut" and "never ran" in msg)
        if not capacity:
            w = pending_too_long(cx, st, float(meta["t_drained"]))
            if w is not None:
                pending.append((name, kind, ph, rs, node, round(w)))
        if ph not in ("Succeeded", "Failed", "TimedOut", "Cancelled"):
            not_ended.append((name, kind, ph, node)); continue
        # A program that exited, whose result nobody recorded: data lost,
        # whatever fault was under way.
        if rs == "ResultLost" and msg.startswith("the program exited"):
            lost_data.append((name, kind, msg[:160], node)); continue
        if rs == "NodeLost":
            if node == lost_node:
                buckets["nodelost"].append((name, kind, node)); continue
            bad.append((name, kind, "NodeLost on a node that was not lost", node)); continue
        if capacity:
            buckets["capacity"].append((name, kind, rs, msg[:120])); continue
        want = {"normal": ("Succeeded", name + "\n"), "slow": ("Succeeded", name + "\n"),
                "timeout": ("TimedOut", None), "oom": ("Failed", None),
                "big": ("Succeeded", None)}.get(kind, (None, None))
        right = ph == want[0] and (want[1] is None or out == want[1])
        if kind == "timeout": right = right and rs == "DeadlineExceeded"
        if kind == "oom": right = right and rs == "OOMKilled"
        if kind == "big":
            right = right and st.get("stdoutBytes") == 307200 and st.get("stdoutTruncated") is True
        if not right and ph == want[0] and "containerd restarted while it ran" in msg:
            buckets["flagged"].append((name, kind, msg[:120], node)); continue
        # Caught by a fault on its node, and said so: its start failed or
        # was lost (StartFailed), the node lost track of it (ResultLost,
        # "its node lost track"), or it was SIGKILLed from outside (137).
        if not right and in_fault(cx, st) and (
                rs == "StartFailed" or (rs == "ResultLost" and msg.startswith("its node lost track"))
                or (rs == "Error" and st.get("exitCode") == 137)):
            buckets["faulted"].append((name, kind, rs, msg[:120], node)); continue
        if right:
            ok[kind] += 1
        else:
            bad.append((name, kind, ph, rs, out[:40], msg[:160], node,
                        st.get("startTime"), st.get("completionTime")))
    uids = collections.defaultdict(set)
    for e in ev:
        io = e.get("involvedObject", {})
        if e.get("reason") == "Scheduled" and io.get("kind") == "Pod":
            uids[io["name"]].add(io["uid"])
    twice = sorted(p for p, u in uids.items() if len(u) > 1)
    lost = n - len(items) + len(not_ended) + len(lost_data)
    cap = n * CAP_PERCENT // 100
    return dict(meta=meta, n=n, items=items, ok=ok, bad=bad, lost=lost, lost_data=lost_data,
                not_ended=not_ended, pending=pending, buckets=buckets, twice=twice,
                left=left, cap=cap)


LABELS = {"capacity": "never got room (Unschedulable, or its timeout passed waiting for the quota)",
          "flagged": "output flagged as possibly cut by containerd's restart",
          "faulted": "caught by a fault on its node while it started or ran, and said so "
                     "(StartFailed, ResultLost \"its node lost track\", or SIGKILLed: 137)",
          "nodelost": "NodeLost on the lost node"}


def report(a, out=sys.stdout):
    m, n, cap = a["meta"], a["n"], a["cap"]
    p = lambda *s: print(*s, file=out)
    rss = m["rss"]
    c0, c1 = rss["controller"]
    grow = (c1 - c0) / c0 * 100 if c0 else float("inf")
    over = [k for k, v in a["buckets"].items() if len(v) > cap]
    wrong = len(a["bad"])
    p(f"### Soak, {n} executions on the chart's install across two nodes "
      f"({m['cores']} cores, kernel {m['kernel']})\n")
    p(f"- Faults injected during the load: {'; '.join(m['faults'])}.")
    p(f"- Executions running at the API server restart: {m['running_at_restart']}"
      f"{'' if m['running_at_restart'] >= 50 else ' (fewer than the 50 asked for)'}.")
    p(f"- The controller ran on {m['controller_node']} (pinned there by controller.nodeSelector, "
      f"so that the node loss is about the agents).")
    p(f"- **wrong {wrong}, lost {a['lost']}, run twice {len(a['twice'])}, "
      f"Pending past the start deadline {len(a['pending'])}, left behind {len(a['left'])}**.")
    p(f"- Executions: {len(a['items'])} of {n} made; right: {sum(a['ok'].values())} "
      f"({', '.join(f'{k} {v}' for k, v in sorted(a['ok'].items()))}); lost: {a['lost']} "
      f"(never ended: {len(a['not_ended'])}, not made: {n - len(a['items'])}, "
      f"a program that exited whose result was lost: {len(a['lost_data'])}).")
    for k, v in a["buckets"].items():
        p(f"- Excused, {LABELS[k]}: {len(v)} (cap {cap}, 5% of {n}){' **over its cap**' if k in over else ''}.")
    p(f"- Pending past the start deadline ({START_DEADLINE} s + {SLACK} s from its pod's binding, "
      f"else its creation, with no start): {len(a['pending'])}.")
    p(f"- Left behind after the drain (pods, pod log dirs, runsc sandboxes, pod cgroups): {len(a['left'])}.")
    made = float(m["t_made"]) - float(m["t0"])
    drained = float(m["t_drained"]) - float(m["t_made"])
    p(f"- Time to make all {n}: {made:.1f} s; from the last made to all ended: {drained:.1f} s.")
    pids = rss.get("controller_pids", [None, None])
    same = pids[0] == pids[1]
    p(f"- RSS: the controller {c0 / 1024:.1f} -> {c1 / 1024:.1f} MiB ({grow:+.0f}%)"
      f"{'' if same else f' (its process changed, pid {pids[0]} -> {pids[1]}: it restarted)'}; "
      f"the agents at the end (each replaced during the soak, so no before): "
      f"{', '.join(f'{k} {v / 1024:.1f} MiB' for k, v in sorted(rss['agents'].items()))}.")
    for b in a["bad"][:20]:
        p("  - wrong:", b)
    for b in a["lost_data"][:20]:
        p("  - lost data:", b)
    for b in a["not_ended"][:20]:
        p("  - never ended:", b)
    for b in a["pending"][:20]:
        p("  - Pending past the start deadline:", b)
    for k in ("faulted", "nodelost", "flagged", "capacity"):
        for b in a["buckets"][k][:20]:
            p(f"  - {k}:", b)
    for t in a["twice"][:20]:
        p("  - run twice:", t)
    for l in a["left"][:20]:
        p("  - left:", l)
    why = []
    for label, v in (("wrong", wrong), ("lost", a["lost"]), ("run twice", len(a["twice"])),
                     ("Pending past the start deadline", len(a["pending"])),
                     ("left behind", len(a["left"]))):
        if v:
            why.append(f"{label} {v}")
    why += [f"{k} {len(a['buckets'][k])} over its cap {cap}" for k in over]
    if grow > RSS_GROWTH:
        why.append(f"the controller's RSS grew {grow:.0f}% (more than {RSS_GROWTH}%)")
    p(f"- Verdict: {'FAILED: ' + '; '.join(why) if why else 'passed'}.")
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(report(account(sys.argv[1])))
