// Serval's live dashboard. Polls dashboard/data (cumulative counters of every model version) once
// a second and keeps the snapshots of the chosen window: every rate, percentile and share shown is
// the difference between the newest snapshot and the one a window ago. No framework, no build.

const POLL_MS = 1000;
const KEEP_S = 900; // the longest window
const history = []; // snapshots, oldest first
const $ = (id) => document.getElementById(id);
const key = (m) => `${m.name}:${m.version}`;
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function fmtRate(x) {
  if (!Number.isFinite(x)) return '–';
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}
function fmtUs(us) {
  if (!Number.isFinite(us)) return '–';
  if (us >= 1e6) return `${(us / 1e6).toFixed(2)} s`;
  if (us >= 1e3) return `${(us / 1e3).toFixed(us >= 1e4 ? 0 : 1)} ms`;
  return `${us.toFixed(0)} µs`;
}
const pct = (x) => (Number.isFinite(x) ? `${(100 * x).toFixed(0)}%` : '–');

/** The snapshot closest to `seconds` before the newest one (the oldest kept if none is that old). */
function snapshotBefore(seconds) {
  const newest = history[history.length - 1];
  const t = newest.time_ms - seconds * 1000;
  for (const s of history) if (s.time_ms >= t) return s;
  return history[0];
}

/** The `q` quantile in µs of the histogram difference `now - then` (bucket counts, bounds in µs). */
function quantile(now, then, bounds, q) {
  const n = now.length;
  const diff = new Array(n);
  let total = 0;
  for (let i = 0; i < n; i++) {
    diff[i] = now[i] - (then?.[i] ?? 0);
    total += diff[i];
  }
  if (total <= 0) return Number.NaN;
  const want = q * total;
  let seen = 0;
  for (let i = 0; i < n; i++) {
    seen += diff[i];
    if (seen >= want) return bounds[i];
  }
  return bounds[n - 1];
}

const requests = (m) => m.success.count + m.fail.count;

/** Everything a card shows for one model version over the window. */
function derive(m, windowS) {
  const newest = history[history.length - 1];
  const old = snapshotBefore(windowS);
  const then = old.models.find((x) => key(x) === key(m));
  const dt = (newest.time_ms - old.time_ms) / 1000;
  const d = (f) => f(m) - (then ? f(then) : 0);
  const okCount = d((x) => x.success.count);
  const queueNs = d((x) => x.queue_ns);
  const inputNs = d((x) => x.compute_input_ns);
  const inferNs = d((x) => x.compute_infer_ns);
  const outputNs = d((x) => x.compute_output_ns);
  const batches = new Map(m.batches);
  for (const [size, count] of then?.batches ?? []) batches.set(size, (batches.get(size) ?? 0) - count);
  const busy = m.instances.map((inst) => {
    const before = then?.instances.find((i) => i.name === inst.name)?.busy_ns ?? 0;
    return { name: inst.name, share: dt > 0 ? Math.min(1, (inst.busy_ns - before) / (dt * 1e9)) : Number.NaN };
  });
  const hits = d((x) => x.cache_hit.count);
  const misses = d((x) => x.cache_miss.count);
  // Requests per second for the sparkline: one point per poll interval over the window.
  const series = [];
  let prev;
  for (const s of history) {
    if (s.time_ms < old.time_ms) continue;
    const x = s.models.find((y) => key(y) === key(m));
    if (prev && x) {
      const px = prev.models.find((y) => key(y) === key(m));
      const sec = (s.time_ms - prev.time_ms) / 1000;
      series.push(sec > 0 ? (requests(x) - (px ? requests(px) : 0)) / sec : 0);
    }
    prev = s;
  }
  return {
    rps: dt > 0 ? d(requests) / dt : Number.NaN,
    failures: d((x) => x.fail.count),
    total: requests(m),
    p50: quantile(m.latency, then?.latency, newest.latency_bounds_us, 0.5),
    p99: quantile(m.latency, then?.latency, newest.latency_bounds_us, 0.99),
    avgQueueUs: okCount > 0 ? queueNs / okCount / 1000 : Number.NaN,
    split: { queue: queueNs, input: inputNs, infer: inferNs, output: outputNs },
    batches: [...batches].filter(([, c]) => c > 0).sort((a, b) => a[0] - b[0]),
    busy,
    cache: hits + misses > 0 || m.cache_hit.count + m.cache_miss.count > 0 ? { hits, misses } : undefined,
    series,
    stream: m.decoupled ? streamFigures(m.decoupled, then?.decoupled, newest.latency_bounds_us) : undefined,
  };
}

/** A decoupled version over the window: mean responses per request, time to first response. */
function streamFigures(now, then, bounds) {
  const requests = now.requests - (then?.requests ?? 0);
  const responses = now.responses - (then?.responses ?? 0);
  return {
    perRequest: requests > 0 ? responses / requests : Number.NaN,
    firstP50: quantile(now.first_response, then?.first_response, bounds, 0.5),
    firstP99: quantile(now.first_response, then?.first_response, bounds, 0.99),
  };
}

function sparkline(values) {
  const w = 320;
  const h = 44;
  if (values.length < 2) return `<svg viewBox="0 0 ${w} ${h}" height="${h}"><text x="0" y="20">collecting…</text></svg>`;
  const max = Math.max(1e-9, ...values);
  // The label sits above the plot (y < 12), so the line never runs through it.
  const pts = values.map((v, i) => `${((i / (values.length - 1)) * w).toFixed(1)},${(h - 1 - (v / max) * (h - 14)).toFixed(1)}`);
  return `<svg viewBox="0 0 ${w} ${h}" height="${h}" preserveAspectRatio="none">
    <polyline points="0,${h} ${pts.join(' ')} ${w},${h}" fill="#2f6fde22" stroke="none"/>
    <polyline points="${pts.join(' ')}" fill="none" stroke="#2f6fde" stroke-width="1.5" vector-effect="non-scaling-stroke"/>
    <text x="${w - 2}" y="10" text-anchor="end">max ${fmtRate(max)}/s</text></svg>`;
}

function histogram(batches, maxBatch) {
  const w = 320;
  const h = 60;
  if (batches.length === 0) return '<p class="muted">no executions in the window</p>';
  const sizes = maxBatch > 0 ? Array.from({ length: maxBatch }, (_, i) => i + 1) : batches.map(([s]) => s);
  const counts = new Map(batches);
  for (const [s] of batches) if (!sizes.includes(s)) sizes.push(s);
  const max = Math.max(...batches.map(([, c]) => c));
  const bw = w / sizes.length;
  const bars = sizes
    .map((s, i) => {
      const c = counts.get(s) ?? 0;
      const bh = (c / max) * (h - 16);
      return `<rect x="${(i * bw + 1).toFixed(1)}" y="${(h - 12 - bh).toFixed(1)}" width="${Math.max(1, bw - 2).toFixed(1)}" height="${bh.toFixed(1)}" fill="#2f6fde"><title>batch ${s}: ${c} executions</title></rect>
        ${sizes.length <= 32 || i % Math.ceil(sizes.length / 16) === 0 ? `<text x="${(i * bw + bw / 2).toFixed(1)}" y="${h - 1}" text-anchor="middle">${s}</text>` : ''}`;
    })
    .join('');
  return `<svg viewBox="0 0 ${w} ${h}" height="${h}">${bars}</svg>`;
}

function splitBar(split) {
  const parts = [
    ['queue', split.queue, '--queue'],
    ['input', split.input, '--input'],
    ['infer', split.infer, '--infer'],
    ['output', split.output, '--output'],
  ];
  const total = parts.reduce((s, p) => s + p[1], 0);
  if (total <= 0) return '<p class="muted">no requests in the window</p>';
  let x = 0;
  const rects = parts
    .map(([name, v, color]) => {
      const width = (v / total) * 320;
      const r = `<rect x="${x.toFixed(1)}" y="0" width="${width.toFixed(1)}" height="14" fill="var(${color})"><title>${name} ${pct(v / total)}</title></rect>`;
      x += width;
      return r;
    })
    .join('');
  const legend = parts.map(([name, v, color]) => `<span><i style="background:var(${color})"></i>${name} ${pct(v / total)}</span>`).join('');
  return `<svg viewBox="0 0 320 14" height="14" preserveAspectRatio="none">${rects}</svg><div class="legend">${legend}</div>`;
}

/** A model version that has never had a request: one line, so the busy ones stay in view. */
function idleCard(m) {
  return `<section class="card idle" data-model="${esc(m.name)}" data-version="${esc(m.version)}">
    <h2>${esc(m.name)} <span class="version">v${esc(m.version || '–')}</span> <span class="badge ${esc(m.state)}" data-field="state">${esc(m.state)}</span></h2>
    ${m.reason ? `<p class="reason">${esc(m.reason)}</p>` : ''}
    <p class="muted">no requests yet · <span data-field="total">0</span> requests · queue <span data-field="queue">${m.pending}</span></p>
  </section>`;
}

function card(m, v) {
  if (v.total === 0 && m.pending === 0) return idleCard(m);
  const busy = v.busy.length
    ? `<div class="busy">${v.busy
        .map((b) => `<span>${esc(b.name)}</span><div class="bar"><span style="width:${Number.isFinite(b.share) ? (100 * b.share).toFixed(1) : 0}%"></span></div><span>${pct(b.share)}</span>`)
        .join('')}</div>`
    : '<p class="muted">no instances</p>';
  const cache = v.cache
    ? `<div class="section"><small>response cache (window)</small>hits ${v.cache.hits}, misses ${v.cache.misses}, hit rate ${pct(v.cache.hits / Math.max(1, v.cache.hits + v.cache.misses))}</div>`
    : '';
  return `<section class="card" data-model="${esc(m.name)}" data-version="${esc(m.version)}">
    <h2>${esc(m.name)} <span class="version">v${esc(m.version || '–')}</span> <span class="badge ${esc(m.state)}" data-field="state">${esc(m.state)}</span></h2>
    ${m.reason ? `<p class="reason">${esc(m.reason)}</p>` : ''}
    <div class="numbers">
      <div><b data-field="queue">${m.pending}</b><small>queue now</small></div>
      <div><b data-field="rps">${fmtRate(v.rps)}</b><small>requests/s</small></div>
      <div><b data-field="p50">${fmtUs(v.p50)}</b><small>p50 latency</small></div>
      <div><b data-field="p99">${fmtUs(v.p99)}</b><small>p99 latency</small></div>
      <div><b data-field="total">${v.total}</b><small>requests (${v.failures} failed)</small></div>
    </div>
    ${
      v.stream
        ? `<div class="numbers stream">
      <div><b data-field="responses_per_request">${fmtRate(v.stream.perRequest)}</b><small>responses/request</small></div>
      <div><b data-field="first_p50">${fmtUs(v.stream.firstP50)}</b><small>p50 first response</small></div>
      <div><b data-field="first_p99">${fmtUs(v.stream.firstP99)}</b><small>p99 first response</small></div>
    </div>`
        : ''
    }
    <div class="section"><small>requests/s over the window</small>${sparkline(v.series)}</div>
    <div class="section"><small>executions by batch size (window${m.dynamic_batching ? ', dynamic batching' : ''})</small>${histogram(v.batches, m.max_batch_size)}</div>
    <div class="section"><small>where request time goes: queue vs compute (avg queue ${fmtUs(v.avgQueueUs)})</small>${splitBar(v.split)}</div>
    <div class="section"><small>instance busy share (window)</small>${busy}</div>
    ${cache}
  </section>`;
}

function render() {
  const newest = history[history.length - 1];
  if (!newest) return;
  const windowS = Number($('window').value);
  $('server-version').textContent = `${newest.server.name} ${newest.server.version}`;
  const ready = $('server-ready');
  ready.textContent = newest.server.ready ? 'server ready' : 'server not ready';
  ready.className = `badge ${newest.server.ready ? 'ready' : 'not-ready'}`;
  $('updated').textContent = `updated ${new Date(newest.time_ms).toLocaleTimeString()}`;
  const onlyReady = $('only-ready').checked;
  const shown = newest.models.filter((m) => !onlyReady || m.state === 'READY').map((m) => ({ m, v: derive(m, windowS) }));
  // Models with requests in the window first, then those with any, each group by name: an order
  // that does not jump about with the rates.
  const rank = ({ v }) => (v.rps > 0 ? 2 : v.total > 0 ? 1 : 0);
  shown.sort((a, b) => rank(b) - rank(a) || a.m.name.localeCompare(b.m.name) || Number(a.m.version) - Number(b.m.version));
  $('models').innerHTML = shown.map(({ m, v }) => card(m, v)).join('');
}

async function poll() {
  try {
    const res = await fetch('dashboard/data', { cache: 'no-store' });
    if (!res.ok) throw new Error(`dashboard/data answered ${res.status}: ${await res.text()}`);
    const snap = await res.json();
    history.push(snap);
    while (history.length > 2 && history[0].time_ms < snap.time_ms - KEEP_S * 1000) history.shift();
    $('error').hidden = true;
    render();
  } catch (e) {
    $('error').textContent = `cannot read the server's statistics: ${e.message}`;
    $('error').hidden = false;
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

$('window').addEventListener('change', render);
$('only-ready').addEventListener('change', render);
poll();
