// Progress of a model seen through Prometheus' nv_inference_pending_request_count (queued +
// executing), so tests wait on the server's state instead of on timing.
import { get } from './http.js';
import type { ServerHandle } from './server.js';

export async function pendingRequests(server: ServerHandle, model: string): Promise<number> {
  const text = (await get(`http://127.0.0.1:${server.metricsPort()}`, '/metrics')).text();
  const m = new RegExp(`^nv_inference_pending_request_count\\{[^}]*model="${model}"[^}]*\\} (\\d+)$`, 'm').exec(text);
  if (!m) throw new Error(`no nv_inference_pending_request_count for ${model} in /metrics`);
  return Number(m[1]);
}

export async function waitPending(server: ServerHandle, model: string, n: number, what = `${n} pending request(s)`): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await pendingRequests(server, model)) !== n) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} on ${model}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
