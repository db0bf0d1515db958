// Keeping the main thread's event loop turning for a moment instead of sleeping in epoll_wait.
// On a virtual machine, waking a thread whose CPU went idle costs tens of µs (the hypervisor's
// trip to wake the CPU, then the scheduler's); at concurrency 1 a request pays it for every
// answer a model's process sends back. While the server awaits one quick answer and nothing
// else, the loop polls (setImmediate: each turn an epoll_wait that does not block), so the answer
// is read without a wake-up. With two answers awaited (a BLS call's model and its caller's, or
// any load) the loop sleeps as usual: the spinning thread would take a core the models need.
let until = 0n;
let turning = false;
let awaited = 0;

function turn(): void {
  if (awaited === 1 && process.hrtime.bigint() < until) setImmediate(turn);
  else turning = false;
}

/** Whether the loop is kept turning now (for tests). */
export function keptAwake(): boolean {
  return turning;
}

/**
 * An answer is awaited from another process; `spin`: it is expected within `ns`, and the server
 * has nothing else to do, so the loop keeps turning until it comes or `ns` has passed. Returns
 * what to call when it has come (or failed); once.
 */
export function awaitAnswer(spin: boolean, ns: bigint): () => void {
  awaited++;
  if (spin && awaited === 1) {
    until = process.hrtime.bigint() + ns;
    if (!turning) {
      turning = true;
      setImmediate(turn);
    }
  }
  let answered = false;
  return () => {
    if (answered) return;
    answered = true;
    awaited--;
  };
}
