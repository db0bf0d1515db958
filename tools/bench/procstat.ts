/**
 * CPU accounting from /proc (Linux): the machine's busy and steal time, one process's time and
 * one thread's time, so each measurement can say how many cores the server's main thread, the
 * whole server, the load generator and everything else used while it ran.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

let clkTck: number | undefined;
export function ticksPerSecond(): number {
  if (clkTck === undefined) {
    try {
      clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clkTck = 100;
    }
  }
  return clkTck;
}

export interface MachineCpu {
  busy: number;
  steal: number;
  total: number;
}

/** Jiffies from /proc/stat's aggregate line: busy = user+nice+system+irq+softirq. */
export function machineCpu(): MachineCpu {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
    return { busy: user + nice + system + irq + softirq, steal, total: user + nice + system + idle + iowait + irq + softirq + steal };
  } catch {
    return { busy: 0, steal: 0, total: 0 };
  }
}

/** utime+stime (jiffies) of a process (all its threads), or of one thread when tid is given. */
export function taskCpu(pid: number, tid?: number): number {
  try {
    const path = tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`;
    const s = readFileSync(path, 'utf8');
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return Number(rest[11]) + Number(rest[12]);
  } catch {
    return 0;
  }
}

export interface CpuSnapshot {
  at: number;
  machine: MachineCpu;
  server: number;
  serverMain: number;
}

export function snapshot(serverPid?: number): CpuSnapshot {
  return {
    at: performance.now(),
    machine: machineCpu(),
    server: serverPid ? taskCpu(serverPid) : 0,
    serverMain: serverPid ? taskCpu(serverPid, serverPid) : 0,
  };
}

/** Cores used between two snapshots; `ownSeconds` is CPU time of our other processes (load generator). */
export interface CpuUse {
  wallS: number;
  serverCores: number;
  mainCores: number;
  loadGenCores: number;
  otherCores: number;
  stealCores: number;
  machineBusyCores: number;
}

export function cpuUse(a: CpuSnapshot, b: CpuSnapshot, loadGenCpuS: number): CpuUse {
  const hz = ticksPerSecond();
  const wallS = Math.max(1e-6, (b.at - a.at) / 1000);
  const cores = (jiffies: number) => jiffies / hz / wallS;
  const serverCores = cores(b.server - a.server);
  const loadGenCores = loadGenCpuS / wallS;
  const machineBusyCores = cores(b.machine.busy - a.machine.busy);
  return {
    wallS,
    serverCores,
    mainCores: cores(b.serverMain - a.serverMain),
    loadGenCores,
    otherCores: Math.max(0, machineBusyCores - serverCores - loadGenCores),
    stealCores: cores(b.machine.steal - a.machine.steal),
    machineBusyCores,
  };
}

/**
 * Waits until the machine's busy time over one second is below `noisyCores` (a bench runs nothing
 * of its own meanwhile); false after `maxS`.
 */
export async function waitForQuiet(maxS: number, noisyCores: number): Promise<boolean> {
  const deadline = Date.now() + maxS * 1000;
  while (Date.now() < deadline) {
    const a = machineCpu();
    await new Promise((r) => setTimeout(r, 1000));
    const b = machineCpu();
    if ((b.busy - a.busy) / ticksPerSecond() < noisyCores) return true;
  }
  return false;
}
