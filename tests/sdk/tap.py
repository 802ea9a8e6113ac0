"""pytest's JUnit XML as TAP, one line per test, for tests/run.sh."""
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
cases = root.iter("testcase")
lines = []
n = 0
for c in cases:
    n += 1
    name = "%s.%s" % (c.get("classname", "").split(".")[-1], c.get("name"))
    bad = c.find("failure")
    if bad is None:
        bad = c.find("error")
    if c.find("skipped") is not None:
        lines.append("ok %d - %s # SKIP" % (n, name))
    elif bad is not None:
        lines.append("not ok %d - %s" % (n, name))
        for l in (bad.get("message") or "").splitlines()[:20]:
            lines.append("# " + l)
    else:
        lines.append("ok %d - %s" % (n, name))
print("1..%d" % n)
print("\n".join(lines))
