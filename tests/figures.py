#!/usr/bin/env python3
"""The README's figures agree with bench/RESULTS.md (issue 29): the
paragraph that quotes bench/chart.sh names its run by commit, and every
"N ms" and "N.N s" in it is a figure of that run's section of RESULTS.md.
Run by make check; exits non-zero, naming the figure, when they differ.

    tests/figures.py [README RESULTS]
"""
import re
import sys


def main(readme_path, results_path):
    readme = open(readme_path).read()
    m = re.search(r"`bench/chart\.sh`[^()]*?, ([0-9a-f]{7,40})[;)]", readme)
    if m is None:
        return "README.md quotes no bench/chart.sh run by commit"
    commit = m.group(1)
    # The paragraph: from the blank line before the mention to the next.
    start = readme.rfind("\n\n", 0, m.start()) + 2
    end = readme.find("\n\n", m.end())
    para = readme[start:end]
    results = open(results_path).read()
    sec = re.search(r"^## the chart's defaults, [0-9-]+ \(%s\).*?(?=^## |\Z)" % commit,
                    results, re.S | re.M)
    if sec is None:
        return "bench/RESULTS.md has no bench/chart.sh run of %s" % commit
    # The measured values: the tables' cells but the first (what was run).
    have = set()
    for row in re.findall(r"^\|(.*)\|$", sec.group(0), re.M):
        for cell in row.split("|")[1:]:
            have.update(re.findall(r"\d+(?:\.\d+)?", cell))
    bad = []
    # "every 300 ms" says what the program did, not what was measured.
    for num, unit in re.findall(r"(?<!every )\b(\d+(?:\.\d+)?) (ms|s)\b", para):
        # Seconds are quoted from milliseconds, to one decimal.
        if unit == "ms" and num not in have:
            bad.append(num + " ms")
        if unit == "s" and not any(abs(float(h) / 1000 - float(num)) < 0.05 for h in have):
            bad.append(num + " s")
    if bad:
        return "README.md quotes %s, not in bench/RESULTS.md's run of %s" % (
            ", ".join(bad), commit)
    print("figures: the README's agree with bench/RESULTS.md (%s)" % commit)
    return None


if __name__ == "__main__":
    args = sys.argv[1:] or ["README.md", "bench/RESULTS.md"]
    err = main(*args)
    if err:
        print("figures: " + err, file=sys.stderr)
        sys.exit(1)
