#!/usr/bin/env python3
"""When a server's slow requests happen: reads the per-request timestamps perf_analyzer writes with
--profile-export-file and prints the percentiles, the share of requests slower than a threshold,
how they cluster, and how many fall in each second (or tenth of a second) of the run.

    perf_analyzer -m MODEL ... --request-count 10000 --profile-export-file run.json
    python3 tools/bench/latency_pattern.py run.json [THRESHOLD_US=1000] [--tenths]

perf_analyzer refuses to overwrite an export file: remove it before each run. A tail that is spread
evenly over the run points at something per request; one that decays from the start of each run
points at warming up (in Serval: V8 compiling the hot path again, docs/benchmarks.md, session 11).
"""

import collections
import json
import sys


def load(path):
    """(start ns, latency µs) per request, first response, in the order sent."""
    with open(path) as f:
        doc = json.load(f)
    out = []
    for exp in doc["experiments"]:
        for r in exp["requests"]:
            if r.get("response_timestamps"):
                out.append((r["timestamp"], (r["response_timestamps"][0] - r["timestamp"]) / 1000))
    out.sort()
    return out


def pct(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    tenths = "--tenths" in sys.argv
    threshold = float(args[1]) if len(args) > 1 else 1000.0
    reqs = load(args[0])
    if not reqs:
        sys.exit(f"{args[0]}: no requests with a response")
    lat = sorted(l for _, l in reqs)
    n = len(lat)
    span = (reqs[-1][0] - reqs[0][0]) / 1e9
    print(
        f"{n} requests in {span:.2f} s ({n / span:.0f}/s): "
        + ", ".join(f"p{int(q * 1000) / 10:g} {pct(lat, q):.0f}" for q in (0.5, 0.9, 0.95, 0.99, 0.999))
        + " µs"
    )
    slow = [i for i, (_, l) in enumerate(reqs) if l > threshold]
    print(f"slower than {threshold:.0f} µs: {len(slow)} ({100 * len(slow) / n:.2f}%)")
    if len(slow) > 1:
        gaps = sorted(b - a for a, b in zip(slow, slow[1:]))
        back_to_back = sum(1 for g in gaps if g == 1)
        print(f"  requests between two slow ones: p10 {pct(gaps, 0.1)}, p50 {pct(gaps, 0.5)}, p90 {pct(gaps, 0.9)}; back to back: {back_to_back}")
    unit = 1e8 if tenths else 1e9
    t0 = reqs[0][0]
    total = collections.Counter(int((t - t0) / unit) for t, _ in reqs)
    late = collections.Counter(int((reqs[i][0] - t0) / unit) for i in slow)
    label = "tenth of a second" if tenths else "second"
    print(f"slow / all per {label}: " + " ".join(f"{late[k]}/{total[k]}" for k in sorted(total)))


if __name__ == "__main__":
    main()
