/**
 * Whether the two (or more) sides of a side-by-side measurement ran on a machine that treated
 * them alike. Two things on a shared VM make one side slower for reasons no server controls:
 * other processes' load, and steal (CPU time the hypervisor gives to other guests), which comes
 * and goes over minutes. A set of sides that differ in either is measured again.
 */

/** Other processes using more cores than this during a side disturb it. */
export const NOISY_CORES = 0.25;
/** Sides whose steal differs by more than this many cores were not measured alike. */
export const UNEVEN_STEAL = 0.08;

/** Cores seen during one side's measurement. */
export interface SideLoad {
  /** Other processes on the machine (not the server, not the load generator). */
  other: number;
  /** Taken by the hypervisor. */
  steal: number;
}

/** Why the sides were not measured alike, or '' when they were. */
export function disturbance(sides: readonly SideLoad[]): string {
  const list = (xs: number[]) => xs.map((c) => c.toFixed(2)).join(', ');
  const other = sides.map((s) => s.other);
  if (other.some((c) => c > NOISY_CORES)) return `other load (${list(other)} cores)`;
  const steal = sides.map((s) => s.steal);
  if (steal.length > 1 && Math.max(...steal) - Math.min(...steal) > UNEVEN_STEAL) return `uneven steal (${list(steal)} cores)`;
  return '';
}
