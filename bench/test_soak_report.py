"""bench/soak_report.py's account on hand-made executions (no cluster):
python3 bench/test_soak_report.py"""
import io, json, os, sys, tempfile, unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak_report

T0 = 1800000000.0       # 2027-01-15T08:00:00Z


def iso(t):
    import datetime
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cx(name, kind, phase, reason=None, stdout=None, msg="", node="n1", created=0, start=1,
       done=5, scheduled=None, **more):
    st = {"phase": phase, "message": msg, "nodeName": node}
    if reason: st["reason"] = reason
    st["stdout"] = name + "\n" if stdout is None else stdout
    if start is not None: st["startTime"] = iso(T0 + start)
    if done is not None: st["completionTime"] = iso(T0 + done)
    if scheduled is not None:
        st["conditions"] = [{"type": "Scheduled", "status": "True",
                             "lastTransitionTime": iso(T0 + scheduled)}]
    st.update(more)
    return {"metadata": {"name": name, "creationTimestamp": iso(T0 + created),
                         "labels": {"soak-kind": kind}}, "status": st}


def run(items, n=None, windows="", left="", events=(), rss=(1000, 1100)):
    d = tempfile.mkdtemp()
    meta = {"n": n or len(items), "lost_node": "n2", "t0": T0, "t_made": T0 + 10,
            "t_drained": T0 + 400, "faults": ["f1", "f2"], "running_at_restart": 52,
            "controller_node": "n1", "cores": 2, "kernel": "k",
            "rss": {"controller": list(rss), "controller_pids": [7, 7],
                    "agents": {"n1": 2048, "n2": 4096}}}
    for f, v in (("meta.json", meta), ("cx.json", {"items": items}),
                 ("events.json", {"items": list(events)})):
        json.dump(v, open(os.path.join(d, f), "w"))
    open(os.path.join(d, "left.txt"), "w").write(left)
    open(os.path.join(d, "windows.txt"), "w").write(windows)
    a = soak_report.account(d)
    out = io.StringIO()
    rc = soak_report.report(a, out)
    return a, rc, out.getvalue()


def good(i):
    return cx(f"soak-{i}", "normal", "Succeeded")


class Account(unittest.TestCase):
    def test_all_right_passes(self):
        a, rc, text = run([good(i) for i in range(20)])
        self.assertEqual(rc, 0)
        self.assertEqual(a["ok"]["normal"], 20)
        self.assertIn("**wrong 0, lost 0, run twice 0, Pending past the start deadline 0, "
                      "left behind 0**", text)
        self.assertIn("- Verdict: passed.", text)

    def test_result_lost_of_an_exited_program_is_lost_even_in_a_fault_window(self):
        lost = cx("soak-0", "normal", "Failed", "ResultLost", stdout="",
                  msg="the program exited (code 0) but no node agent recorded its result within 30000 ms")
        a, rc, text = run([lost] + [good(i) for i in range(1, 20)],
                          windows=f"n1 {T0} {T0 + 10}\n")
        self.assertEqual(rc, 1)
        self.assertEqual(a["lost"], 1)
        self.assertEqual(len(a["buckets"]["faulted"]), 0)
        self.assertIn("FAILED: lost 1", text)

    def test_node_lost_track_in_a_window_is_excused_outside_wrong(self):
        lt = lambda i: cx(f"soak-{i}", "normal", "Failed", "ResultLost", stdout="",
                          msg="its node lost track of the program (Unknown): ...")
        a, rc, _ = run([lt(0)] + [good(i) for i in range(1, 20)], windows=f"n1 {T0} {T0 + 10}\n")
        self.assertEqual((rc, len(a["buckets"]["faulted"]), len(a["bad"])), (0, 1, 0))
        a, rc, _ = run([lt(0)] + [good(i) for i in range(1, 20)], windows=f"n2 {T0} {T0 + 10}\n")
        self.assertEqual((rc, len(a["buckets"]["faulted"]), len(a["bad"])), (1, 0, 1))

    def test_bucket_over_its_cap_fails(self):
        # n 40: cap 2. Two NodeLost pass, three fail.
        nl = lambda i: cx(f"soak-{i}", "normal", "Failed", "NodeLost", stdout="", node="n2")
        a, rc, _ = run([nl(0), nl(1)] + [good(i) for i in range(2, 40)])
        self.assertEqual((a["cap"], len(a["buckets"]["nodelost"]), rc), (2, 2, 0))
        a, rc, text = run([nl(0), nl(1), nl(2)] + [good(i) for i in range(3, 40)])
        self.assertEqual(rc, 1)
        self.assertIn("nodelost 3 over its cap 2", text)
        self.assertIn("NodeLost on the lost node: 3 (cap 2, 5% of 40) **over its cap**", text)

    def test_pending_past_the_start_deadline(self):
        late_start = cx("soak-0", "normal", "Succeeded", created=0, start=151, done=152)
        on_time = cx("soak-1", "normal", "Succeeded", created=0, start=149, done=150)
        late_fail = cx("soak-2", "normal", "Failed", "StartFailed", stdout="", start=None,
                       done=170, msg="its program did not start within 120 s")
        # Waited for room 200 s, then bound and started at once: not the deadline's.
        waited = cx("soak-3", "normal", "Succeeded", created=0, scheduled=200, start=205, done=206)
        never = cx("soak-4", "normal", "Pending", start=None, done=None)
        a, rc, text = run([late_start, on_time, late_fail, waited, never] +
                          [good(i) for i in range(5, 20)])
        self.assertEqual(sorted(p[0] for p in a["pending"]), ["soak-0", "soak-2", "soak-4"])
        self.assertEqual(a["lost"], 1)
        self.assertEqual(rc, 1)
        self.assertIn("Pending past the start deadline 3", text)

    def test_rss_growth_and_left_and_twice(self):
        ev = [{"reason": "Scheduled", "involvedObject": {"kind": "Pod", "name": "p", "uid": u}}
              for u in ("a", "b")]
        a, rc, text = run([good(i) for i in range(20)], rss=(1000, 1250), left="pod/x\n", events=ev)
        self.assertEqual((rc, len(a["left"]), a["twice"]), (1, 1, ["p"]))
        self.assertIn("FAILED: run twice 1; left behind 1; the controller's RSS grew 25%", text)
        _, rc, _ = run([good(i) for i in range(20)], rss=(1000, 1200))
        self.assertEqual(rc, 0)

    def test_wrong_output_and_missing(self):
        w = cx("soak-0", "normal", "Succeeded", stdout="other\n")
        a, rc, text = run([w] + [good(i) for i in range(1, 20)], n=21)
        self.assertEqual((len(a["bad"]), a["lost"], rc), (1, 1, 1))
        self.assertIn("FAILED: wrong 1; lost 1", text)


if __name__ == "__main__":
    unittest.main()
