#!/usr/bin/env python3
"""Where a server's CPU goes per request: one perf_analyzer run against a running server, with the
CPU time of every thread of the server's process tree (from /proc) and of perf_analyzer itself,
divided by the requests served. Works for Serval and tritonserver alike (give the server's PID).

    python3 tools/bench/cpu_split.py PID PORT grpc|http MODEL CONCURRENCY [perf_analyzer args...]

Prints throughput, p50/p99, the server process's RSS and peak RSS, cores per thread group (the
main thread, split into user and system time; the process's other threads; each child's threads)
and µs of CPU per request for the server tree and for perf_analyzer. On two cores shared with the
load generator, throughput follows total CPU per request; docs/benchmarks.md (the triton analysis)
uses it that way. Linux only.
"""

import os
import re
import subprocess
import sys
import threading
import time

PERF_ANALYZER = os.path.join(os.path.dirname(__file__), "..", "..", ".venv", "bin", "perf_analyzer")
HZ = os.sysconf("SC_CLK_TCK")


def tree(pid):
    out = [pid]
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                for child in f.read().split():
                    out += tree(int(child))
    except FileNotFoundError:
        pass
    return out


def thread_ticks(root):
    """(process, thread, name) -> (user, system) ticks for every thread under `root`."""
    ticks = {}
    for pid in tree(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    stat = f.read()
            except FileNotFoundError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            ticks[(pid, int(tid), name)] = (int(fields[11]), int(fields[12]))
    return ticks


def process_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    return sum(int(x) for x in fields[11:15])


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    server, port, protocol, model, concurrency = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
    cmd = [PERF_ANALYZER, "-m", model, "-u", f"localhost:{port}", "-i", protocol, "-b", "1",
           "--concurrency-range", f"{concurrency}:{concurrency}", "-p", "2000", "-s", "50", "-r", "4", *sys.argv[6:]]
    before = thread_ticks(server)
    started = time.time()
    load = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    load_ticks = [0]

    def watch():
        # perf_analyzer's own CPU, read until it exits (its /proc entry goes with it).
        while load.poll() is None:
            try:
                load_ticks[0] = process_ticks(load.pid)
            except (FileNotFoundError, ProcessLookupError):
                pass
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    out, _ = load.communicate()
    watcher.join()
    after = thread_ticks(server)
    wall = time.time() - started
    thr = re.search(r"Throughput: ([\d.]+) infer/sec", out)
    lat = re.search(r"p50 latency: (\d+) usec.*?p99 latency: (\d+) usec", out, re.S)
    if not thr or not lat:
        sys.exit(out)
    rate = float(thr.group(1))
    groups = {}
    for key, (user, system) in after.items():
        u0, s0 = before.get(key, (0, 0))
        du, ds = user - u0, system - s0
        if du + ds <= 0:
            continue
        pid, tid, name = key
        if pid == server and tid == server:
            groups["main user"] = du
            groups["main system"] = ds
            label = "main"
        else:
            label = name if pid == server else f"child {name}"
        groups[label] = groups.get(label, 0) + du + ds
    total = sum(v for k, v in groups.items() if k not in ("main user", "main system"))
    with open(f"/proc/{server}/status") as f:
        mem = dict(line.split(":", 1) for line in f if line.startswith(("VmRSS", "VmHWM")))
    cores = lambda ticks: ticks / HZ / wall  # noqa: E731
    split = " ".join(f"{k}={cores(v):.2f}" for k, v in sorted(groups.items(), key=lambda kv: -kv[1]))
    print(
        f"{rate:.0f} infer/s, p50 {lat.group(1)} us, p99 {lat.group(2)} us | RSS {mem['VmRSS'].strip()}, peak {mem['VmHWM'].strip()} | "
        f"cores: server {cores(total):.2f} ({split}), perf_analyzer {cores(load_ticks[0]):.2f} | "
        f"CPU per request: server {cores(total) / rate * 1e6:.0f} us, perf_analyzer {cores(load_ticks[0]) / rate * 1e6:.0f} us"
    )


if __name__ == "__main__":
    main()
