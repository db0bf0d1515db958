/**
 * A server's whole process tree from /proc (Linux): MLServer runs inference in worker processes
 * it spawns, so its memory and CPU are those of the tree, not of the process the benchmark
 * started. Serval is one process (worker threads), for which the tree is that process.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { taskCpu } from '../procstat.js';

/** `pid` and every descendant of it alive now. */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [pid];
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const s = readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid);
      if (list) list.push(Number(e));
      else children.set(ppid, [Number(e)]);
    } catch {
      /* exited meanwhile */
    }
  }
  const out: number[] = [];
  const todo = [pid];
  while (todo.length) {
    const p = todo.pop()!;
    out.push(p);
    todo.push(...(children.get(p) ?? []));
  }
  return out;
}

/** The value in kB of a `Key:   N kB` line of a /proc status-like file, as bytes (0 when absent). */
export function kbField(text: string, key: string): number {
  const m = text.match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'));
  return m ? Number(m[1]) * 1024 : 0;
}

export interface TreeMemory {
  rss: number;
  pss: number;
  processes: number;
}

/** A `Key:   N kB` field of /proc/PID/status as bytes; undefined once the process is gone. */
export function statusBytes(pid: number, key: string): number | undefined {
  try {
    return kbField(readFileSync(`/proc/${pid}/status`, 'utf8'), key);
  } catch {
    return undefined;
  }
}

/** Sum of a /proc/PID/status field (VmRSS, VmHWM) over `pids`, bytes; processes gone count 0. */
export function statusSum(pids: readonly number[], key: string): number {
  return pids.reduce((n, p) => n + (statusBytes(p, key) ?? 0), 0);
}

/**
 * Sum of VmRSS over `pids`, bytes: /proc/PID/status only, which reads the process's counters.
 * Samplers that run during a measurement use this with a tree listed once beforehand: reading
 * smaps_rollup walks the process's page tables under its mmap lock, and listing /proc scans every
 * process; at 10 samples a second the two cost Serval 8-14% of its HTTP throughput and
 * tritonserver 4-6% (docs/benchmarks.md, session 14).
 */
export function rssOf(pids: readonly number[]): number {
  return statusSum(pids, 'VmRSS');
}

/** Sum of RSS (VmRSS) and PSS (smaps_rollup) over the tree, bytes. */
export function treeMemory(pid: number): TreeMemory {
  let rss = 0;
  let pss = 0;
  let processes = 0;
  for (const p of processTree(pid)) {
    const own = statusBytes(p, 'VmRSS');
    if (own === undefined) continue;
    rss += own;
    processes++;
    try {
      pss += kbField(readFileSync(`/proc/${p}/smaps_rollup`, 'utf8'), 'Pss');
    } catch {
      /* no smaps_rollup (old kernel) or gone */
    }
  }
  return { rss, pss, processes };
}

/** utime+stime (jiffies) summed over the tree. */
export function treeCpu(pid: number): number {
  return processTree(pid).reduce((a, p) => a + taskCpu(p), 0);
}
