// Targets and the Markdown / console rendering of one benchmark run.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { beginMarker, endMarker } from './doc_section.js';
import type { Ceiling, Point, ProfileRun, Protocol, Results, Target } from './types.js';

export const BEGIN = beginMarker('generated');
export const END = endMarker('generated');

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

function rate(x: number | undefined): string {
  if (x === undefined || !Number.isFinite(x)) return '–';
  if (x >= 100) return x.toFixed(0);
  if (x >= 10) return x.toFixed(1);
  return x.toFixed(2);
}
/** Throughput of a point, with † when other processes used > 0.25 cores during it. */
const rateP = (p: Point | undefined) =>
  p?.res ? `${rate(p.res.throughput)}${(p.use?.otherCores ?? 0) > 0.25 ? ' †' : ''}` : p && !p.ok ? 'failed' : '–';
const pct = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '–' : `${(100 * x).toFixed(0)}%`);
const times = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '–' : `${x.toFixed(2)}×`);
const ms = (us: number | undefined) => (us === undefined || !Number.isFinite(us) ? '–' : (us / 1000).toFixed(2));
const cores = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(2));
/** CPU µs per request from cores used and requests/s; a lower bound (the run's wall time includes perf_analyzer's start-up, when no requests flow). */
const usPer = (c: number | undefined, perS: number | undefined) => (c === undefined || !perS ? '–' : ((c / perS) * 1e6).toFixed(0));
const avgBatch = (p: Point | undefined) =>
  p?.res?.inferenceCount && p.res.executionCount ? (p.res.inferenceCount / p.res.executionCount).toFixed(1) : '–';

function find(r: Results, q: Partial<Point>): Point[] {
  return r.points.filter((p) => p.ok && (Object.keys(q) as (keyof Point)[]).every((k) => q[k] === undefined || p[k] === q[k]));
}

function thr(r: Results, q: Partial<Point>): number | undefined {
  const ps = find(r, q);
  return ps.length ? mean(ps.map((p) => p.res!.throughput)) : undefined;
}

function topConc(r: Results): number {
  const cs = r.points.filter((p) => p.phase === 'model').map((p) => p.conc);
  return cs.length ? Math.max(...cs) : 32;
}

function protocolsOf(r: Results, phase: Point['phase']): Protocol[] {
  return (['grpc', 'http'] as const).filter((pr) => r.points.some((p) => p.phase === phase && p.proto === pr));
}

export function computeTargets(r: Results): Target[] {
  const out: Target[] = [];
  const C = topConc(r);
  const ceil = (m: string): Ceiling | undefined => r.ceilings.find((c) => c.model === m);
  const t = (
    id: string,
    what: string,
    protocol: Protocol | '-',
    measured: string,
    required: string,
    value: number | undefined,
    threshold: number,
    higherIsBetter = true,
  ) =>
    out.push({
      id,
      what,
      protocol,
      measured,
      required,
      value: value ?? NaN,
      threshold,
      met: value === undefined || !Number.isFinite(value) ? undefined : higherIsBetter ? value >= threshold : value <= threshold,
    });

  const ranker = ceil('ranker_mlp');
  for (const proto of protocolsOf(r, 'model')) {
    if (!r.points.some((p) => p.model === 'ranker_mlp' && p.proto === proto)) continue;
    const b = thr(r, { phase: 'model', model: 'ranker_mlp', variant: 'b', proto, conc: C });
    const c = thr(r, { phase: 'model', model: 'ranker_mlp', variant: 'c', proto, conc: C });
    const aBest = ranker?.bestValue;
    const a1 = ranker?.batch1Value;
    // For context: the largest batch a closed loop of C batch-1 requests can form is C.
    const atOrBelow = ranker?.runs
      .filter((x) => x.batch <= C)
      .reduce<typeof ranker.best | undefined>((a, x) => (!a || x.itemsPerS > a.itemsPerS ? x : a), undefined);
    const context =
      atOrBelow && atOrBelow.batch < (ranker?.best.batch ?? 0)
        ? `; vs (a) at batch ≤ ${C} (${rate(atOrBelow.itemsPerS)}/s, batch ${atOrBelow.batch}): ${pct(c !== undefined ? c / atOrBelow.itemsPerS : undefined)}`
        : '';
    t(
      'ranker-c-vs-a',
      `ranker_mlp (c)@${C} ≥ 90% of (a) at best batch`,
      proto,
      `(c) ${rate(c)}/s vs (a) ${rate(aBest)}/s (batch ${ranker?.best.batch}, ${ranker?.best.threads} thr) = ${pct(c !== undefined && aBest ? c / aBest : undefined)}${context}`,
      '≥ 90%',
      c !== undefined && aBest ? c / aBest : undefined,
      0.9,
    );
    const gainServal = b && c !== undefined ? c / b : undefined;
    const gainCeil = aBest && a1 ? aBest / a1 : undefined;
    t(
      'ranker-batching-gain',
      `ranker_mlp (c)/(b) ≥ 0.9 × (a best)/(a batch 1), at ${C}`,
      proto,
      `(c)/(b) = ${times(gainServal)} vs 0.9 × ${times(gainCeil)} = ${times(gainCeil ? 0.9 * gainCeil : undefined)} → ${pct(gainServal !== undefined && gainCeil ? gainServal / gainCeil : undefined)} of the ceiling's gain`,
      '≥ 90% of the gain',
      gainServal !== undefined && gainCeil ? gainServal / gainCeil : undefined,
      0.9,
    );
  }
  for (const m of ['image_classifier', 'resnet50']) {
    const a = ceil(m);
    for (const proto of protocolsOf(r, 'model')) {
      if (!r.points.some((p) => p.model === m && p.proto === proto)) continue;
      const b = thr(r, { phase: 'model', model: m, variant: 'b', proto, conc: C });
      const c = thr(r, { phase: 'model', model: m, variant: 'c', proto, conc: C });
      t(
        `${m}-c-vs-b`,
        `${m} (c)@${C} within 5% of (b) (not below 95% of it)`,
        proto,
        `(c) ${rate(c)}/s vs (b) ${rate(b)}/s = ${pct(c !== undefined && b ? c / b : undefined)}`,
        '≥ 95%',
        c !== undefined && b ? c / b : undefined,
        0.95,
      );
      t(
        `${m}-c-vs-a`,
        `${m} (c)@${C} ≥ 90% of (a) at best batch`,
        proto,
        `(c) ${rate(c)}/s vs (a) ${rate(a?.bestValue)}/s (batch ${a?.best.batch}, ${a?.best.threads} thr) = ${pct(c !== undefined && a?.bestValue ? c / a.bestValue : undefined)}`,
        '≥ 90%',
        c !== undefined && a?.bestValue ? c / a.bestValue : undefined,
        0.9,
      );
    }
  }
  for (const proto of protocolsOf(r, 'simple')) {
    const conc = Math.max(...r.points.filter((p) => p.phase === 'simple' && p.conc > 1).map((p) => p.conc), 16);
    const s = thr(r, { phase: 'simple', variant: 's', proto, conc });
    const e = thr(r, { phase: 'simple', variant: 'e', proto, conc });
    t(
      'simple-vs-bare',
      `simple@${conc} ≥ 60% of the bare ${proto === 'grpc' ? 'grpc-js' : 'fastify'} server (e)`,
      proto,
      `Serval ${rate(s)}/s vs bare ${rate(e)}/s = ${pct(s !== undefined && e ? s / e : undefined)}`,
      '≥ 60%',
      s !== undefined && e ? s / e : undefined,
      0.6,
    );
  }
  for (const proto of protocolsOf(r, 'simple')) {
    const p = find(r, { phase: 'simple', variant: 's', proto, conc: 1 })[0];
    const req = p?.res?.serverRequestUs;
    const inf = p?.res?.computeInferUs;
    const ov = req !== undefined && inf !== undefined ? req - inf : undefined;
    t(
      'simple-overhead',
      'simple@1 server overhead (request latency − compute infer, averages) ≤ 0.2 ms',
      proto,
      `${req ?? '–'} µs − ${inf ?? '–'} µs = ${ov ?? '–'} µs (average; the statistics API has no median)`,
      '≤ 200 µs',
      ov,
      200,
      false,
    );
  }
  return out;
}

const verdict = (m: boolean | undefined) => (m === undefined ? 'not measured' : m ? '**met**' : '**missed**');

function table(head: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

export function renderMarkdown(r: Results): string {
  const L: string[] = [];
  const C = topConc(r);
  L.push(
    `Generated by \`${r.commandLine}\` (${r.mode} run) from ${r.startedAt} to ${r.finishedAt} (${(r.durationS / 60).toFixed(1)} min).`,
    `Raw perf_analyzer / bench-onnx output, CSV reports (\`-f\`), CPU profiles and \`results.json\` of this run: \`${r.workDir}/\` (not committed).`,
    '',
    '### Targets',
    '',
    `Throughput targets are evaluated at concurrency ${C}; (a) is the higher of the sweep and the re-check when both exist (noise only ever slows a tight loop down).`,
    '',
    table(
      ['target', 'protocol', 'measured', 'required', 'result'],
      r.targets.map((t) => [t.what, t.protocol, t.measured, t.required, verdict(t.met)]),
    ),
    '',
    '### Setup',
    '',
    table(['', ''], [...r.setup, ...r.settings, ['Run date (UTC)', r.startedAt]]),
    '',
  );

  // (a)
  if (r.ceilings.length)
    L.push(
      '### (a) Ceiling: onnxruntime-node in a tight in-process loop',
      '',
      'items/s; `node dist/tools/bench_onnx.js MODEL.onnx --batch … --threads 1|2` (one session, `session.run` back to back, same inputs).',
      '',
    );
  if (r.ceilings.length)
    L.push(
      table(
        [
          'model',
          'max batch',
          'batch 1, 1 thr',
          'batch 1, 2 thr',
          'best (batch, threads)',
          're-check best / batch 1',
          'used for targets: best / batch 1',
          'other load (cores)',
        ],
        r.ceilings.map((c) => {
          const at = (b: number, t: number) => rate(c.runs.find((x) => x.batch === b && x.threads === t)?.itemsPerS);
          return [
            c.model,
            String(c.maxBatch),
            at(1, 1),
            at(1, 2),
            `${rate(c.best.itemsPerS)} (${c.best.batch}, ${c.best.threads})`,
            c.afterBest !== undefined ? `${rate(c.afterBest)} / ${rate(c.afterBatch1)}` : '–',
            `${rate(c.bestValue)} / ${rate(c.batch1Value)}`,
            cores(c.otherCores),
          ];
        }),
      ),
      '',
      'Full sweep (items/s):',
      '',
      table(
        ['model', 'threads', 'by batch size'],
        r.ceilings.flatMap((c) =>
          [1, 2].map((t) => [
            c.model,
            String(t),
            c.runs
              .filter((x) => x.threads === t)
              .map((x) => `b${x.batch}: ${rate(x.itemsPerS)}`)
              .join(', '),
          ]),
        ),
      ),
      '',
    );

  // (b)(c)(d)
  const models = [...new Set(r.points.filter((p) => p.phase === 'model').map((p) => p.model))];
  if (models.length) {
    L.push(
      '### (b) no dynamic batching, (c) dynamic batching, (d) dynamic batching + 2 instances',
      '',
      'perf_analyzer infer/s at batch 1 per request. "avg batch" = server inference count / execution count. Cores: CPU used during the whole perf_analyzer run (start-up and stabilisation included) by the server\'s main thread, the whole server, perf_analyzer, and everything else on the machine (from /proc). The last column divides throughput by the CPU actually used, to separate "slower per CPU" from "less CPU available" (perf_analyzer shares the 2 cores). † = other processes used more than 0.25 cores during that point even after one wait-and-retry (treat it as noise).',
      '',
    );
    const rows: string[][] = [];
    for (const m of models) {
      const a = r.ceilings.find((c) => c.model === m);
      for (const proto of ['grpc', 'http'] as const) {
        for (const conc of [...new Set(r.points.filter((p) => p.model === m && p.phase === 'model').map((p) => p.conc))]) {
          const get = (v: Point['variant']) => find(r, { phase: 'model', model: m, variant: v, proto, conc })[0];
          const b = get('b');
          const c = get('c');
          const d = get('d');
          const c1 = get('c1');
          const cs = get('cs');
          if (!b && !c && !d) continue;
          const tb = b?.res?.throughput;
          const tc = c?.res?.throughput;
          const td = d?.res?.throughput;
          const perCore = tc !== undefined && c?.use?.serverCores ? tc / c.use.serverCores : undefined;
          const aPerCore = a ? a.best.itemsPerS / a.best.threads : undefined;
          rows.push([
            m,
            proto,
            String(conc),
            rateP(b),
            rateP(c),
            rateP(d),
            rateP(c1),
            rateP(cs),
            times(tb && tc !== undefined ? tc / tb : undefined),
            times(tc && td !== undefined ? td / tc : undefined),
            pct(tc !== undefined && a ? tc / a.bestValue : undefined),
            `${avgBatch(c)} / ${avgBatch(d)}`,
            `${ms(b?.res?.p50Us)} / ${ms(c?.res?.p50Us)} / ${ms(d?.res?.p50Us)}`,
            c?.res?.serverRequestUs !== undefined ? `${c.res.serverRequestUs} (q ${c.res.queueUs}, inf ${c.res.computeInferUs})` : '–',
            `${cores(b?.use?.mainCores)} / ${cores(c?.use?.mainCores)} / ${cores(d?.use?.mainCores)}`,
            `${cores(c?.use?.serverCores)}`,
            cores(c?.use?.loadGenCores),
            cores(c?.use?.otherCores),
            `${rate(perCore)} / ${rate(aPerCore)}`,
          ]);
        }
      }
    }
    L.push(
      table(
        [
          'model',
          'proto',
          'conc',
          '(b) infer/s',
          '(c) infer/s',
          '(d) infer/s',
          '(c) 1 intra-op thread',
          '(c) ORT spinning on',
          '(c)/(b)',
          '(d)/(c)',
          '(c)/(a best)',
          'avg batch (c) / (d)',
          'client p50 ms (b) / (c) / (d)',
          '(c) server avg µs',
          'main-thread cores (b) / (c) / (d)',
          'server cores (c)',
          'perf_analyzer cores (c)',
          'other cores (c)',
          'items/s per core: (c) per server core / (a best) per thread',
        ],
        rows,
      ),
      '',
    );
  }

  // (e)
  const simple = r.points.filter((p) => p.phase === 'simple');
  if (simple.length) {
    L.push(
      '### (e) `simple` under load: Serval vs the bare protocol servers',
      '',
      "`tools/bench/bare_http.ts` (fastify route) and `tools/bench/bare_grpc.ts` (grpc-js ModelInfer handler, raw_input_contents) compute `simple`'s sum and difference inside the handler. Same perf_analyzer flags for both; runs interleaved.",
      '',
    );
    const rows: string[][] = [];
    for (const p of simple.filter((x) => x.variant === 's' && x.conc > 1)) {
      const e = find(r, { phase: 'simple', variant: 'e', proto: p.proto, conc: p.conc, repeat: p.repeat })[0];
      rows.push([
        p.proto,
        String(p.conc),
        String(p.repeat + 1),
        rateP(p),
        rateP(e),
        pct(p.res && e?.res ? p.res.throughput / e.res.throughput : undefined),
        `${ms(p.res?.p50Us)} / ${ms(e?.res?.p50Us)}`,
        cores(p.use?.mainCores),
        cores(p.use?.serverCores),
        cores(e?.use?.serverCores),
        `${usPer(p.use?.mainCores, p.res?.throughput)} / ${usPer(e?.use?.mainCores, e?.res?.throughput)}`,
        `${cores(p.use?.loadGenCores)} / ${cores(e?.use?.loadGenCores)}`,
        `${cores(p.use?.otherCores)} / ${cores(e?.use?.otherCores)}`,
      ]);
    }
    L.push(
      table(
        [
          'proto',
          'conc',
          'repeat',
          'Serval infer/s',
          'bare infer/s',
          'Serval / bare',
          'client p50 ms Serval / bare',
          'Serval main-thread cores',
          'Serval cores',
          'bare server cores',
          'main-thread CPU µs per request (lower bound) Serval / bare',
          'perf_analyzer cores Serval / bare',
          'other cores Serval / bare',
        ],
        rows,
      ),
      '',
    );

    // (f)
    L.push(
      "### (f) `simple` at concurrency 1: Serval's own overhead",
      '',
      "From perf_analyzer's server-side section (the statistics extension). The statistics API carries cumulative sums only, so these are **averages**, not medians. Serval's request clock starts when the decoded request reaches the core and stops when the outputs are scattered (wire decode/encode are outside it); the bare servers' \"request\" is their whole handler. The client-side p50 difference to the bare server of the same protocol is an end-to-end median view of the same overhead.",
      '',
    );
    const rows2: string[][] = [];
    for (const p of simple.filter((x) => x.variant === 's' && x.conc === 1)) {
      const e = find(r, { phase: 'simple', variant: 'e', proto: p.proto, conc: 1 })[0];
      const s = p.res;
      rows2.push([
        p.proto,
        rate(s?.throughput),
        String(s?.serverRequestUs ?? '–'),
        String(s?.computeInferUs ?? '–'),
        s?.serverRequestUs !== undefined && s.computeInferUs !== undefined ? `**${s.serverRequestUs - s.computeInferUs}**` : '–',
        s ? `overhead ${s.serverOverheadUs} + queue ${s.queueUs} + input ${s.computeInputUs} + output ${s.computeOutputUs}` : '–',
        `${ms(s?.p50Us)} / ${ms(e?.res?.p50Us)}`,
        s && e?.res ? String(s.p50Us - e.res.p50Us) : '–',
        `${rate(e?.res?.throughput)}`,
      ]);
    }
    L.push(
      table(
        [
          'proto',
          'Serval infer/s',
          'avg request µs',
          'avg compute infer µs',
          'overhead µs (request − infer)',
          'perf_analyzer breakdown µs',
          'client p50 ms Serval / bare',
          'p50 difference µs',
          'bare infer/s at c=1',
        ],
        rows2,
      ),
      '',
    );
  }

  // profiles
  if (r.profiles.length) {
    L.push(
      '### CPU profiles of the servers under load',
      '',
      'Separate runs with `node --cpu-prof` (the profiler slows the server; these throughputs are not used above), cut to the samples taken while perf_analyzer ran. Self time of the **main thread**, bucketed by where the code lives. "(program)" is native time V8 cannot attribute to a JS function (libuv, syscalls, native parts of node core); "native builtins" are C++ functions called from JS (`postMessage`, socket `writev`, generated protobuf codecs). The sampler records wall time: a native call during which the thread was descheduled (both cores busy) is counted as that call\'s self time. "µs per request" divides by the requests the server answered during the run (its statistics).',
      '',
    );
    const perReq = (pr: ProfileRun, ms: number) => (pr.requests ? (ms * 1000) / pr.requests : undefined);
    const us = (x: number | undefined) => (x === undefined ? '–' : x.toFixed(1));
    for (const proto of ['grpc', 'http'] as const) {
      const sv = r.profiles.find((p) => p.server === 'serval' && p.proto === proto && p.point?.model === 'simple' && p.main && p.requests);
      const bare = r.profiles.find((p) => p.server !== 'serval' && p.proto === proto && p.main && p.requests);
      if (!sv || !bare) continue;
      const names = [...new Set([...sv.main!.buckets, ...bare.main!.buckets].map((b) => b.bucket))].filter((b) => b !== 'idle');
      const get = (pr: ProfileRun, b: string) => perReq(pr, pr.main!.buckets.find((x) => x.bucket === b)?.ms ?? 0);
      names.sort((a, b) => (get(sv, b) ?? 0) - (get(sv, a) ?? 0));
      const busy = (pr: ProfileRun) => perReq(pr, pr.main!.totalMs - pr.main!.idleMs);
      L.push(
        `#### Main-thread time per request, \`simple\` at concurrency 16 over ${proto}: Serval vs the bare ${proto === 'grpc' ? 'grpc-js' : 'fastify'} server`,
        '',
        table(
          ['bucket', 'Serval µs / request', 'bare µs / request', 'difference'],
          [
            [
              '**busy (not idle), total**',
              `**${us(busy(sv))}**`,
              `**${us(busy(bare))}**`,
              `**${us((busy(sv) ?? 0) - (busy(bare) ?? 0))}**`,
            ],
            ...names.slice(0, 16).map((b) => [b, us(get(sv, b)), us(get(bare, b)), us((get(sv, b) ?? 0) - (get(bare, b) ?? 0))]),
          ],
        ),
        '',
        `Requests during the profiled runs: Serval ${sv.requests}, bare ${bare.requests}; throughput under the profiler ${rate(sv.point?.res?.throughput)} vs ${rate(bare.point?.res?.throughput)} infer/s.`,
        '',
      );
    }
    for (const pr of r.profiles) {
      L.push(`#### ${pr.scenario}`, '');
      if (pr.error) {
        L.push(`Failed: ${pr.error}`, '');
        continue;
      }
      const m = pr.main!;
      const t = pr.point?.res?.throughput;
      L.push(
        `${pr.server}, ${pr.proto}: ${rate(t)} infer/s under the profiler; main thread busy **${pct(m.busyFraction)}** of ${(m.totalMs / 1000).toFixed(1)} s` +
          (pr.requests
            ? `, **${us(perReq(pr, m.totalMs - m.idleMs))} µs of main-thread time per request** (${pr.requests} requests)`
            : '') +
          ` (${m.file}); main-thread cores from /proc during the run ${cores(pr.point?.use?.mainCores)}, perf_analyzer ${cores(pr.point?.use?.loadGenCores)}.` +
          (pr.workers.length
            ? ` Worker-thread profiles: ${pr.workers.map((w) => `busy ${pct(w.busyFraction)}`).join(', ')} (JS only; ORT's own threads are not in them).`
            : ''),
        '',
        table(
          ['main-thread bucket', 'share', 'ms'],
          m.buckets.slice(0, 12).map((b) => [b.bucket, pct(b.share), b.ms.toFixed(0)]),
        ),
        '',
        table(
          ['top function (self)', 'where', 'share'],
          m.top.slice(0, 12).map((f) => [`\`${f.fn}\``, f.where ? `\`${f.where}\`` : '', `${(100 * f.share).toFixed(1)}%`]),
        ),
        '',
        (m.servalInclusive ?? []).length
          ? `${table(
              ["Serval's functions (inclusive)", 'where', 'share'],
              m.servalInclusive.slice(0, 10).map((f) => [`\`${f.fn}\``, `\`${f.where}\``, `${(100 * f.share).toFixed(1)}%`]),
            )}\n`
          : '',
      );
    }
  }

  const failed = r.points.filter((p) => !p.ok);
  if (failed.length || r.errors.length) {
    L.push('### Notes and failures', '', ...r.errors.map((e) => `- ${e}`), '');
  }

  L.push(
    '### All perf_analyzer points',
    '',
    '<details><summary>every point with its CPU accounting</summary>',
    '',
    table(
      [
        'phase',
        'model',
        'server',
        'proto',
        'conc',
        'infer/s',
        'p50 / p99 ms',
        'server avg µs (queue / infer)',
        'avg batch',
        'main / server / perf_analyzer / other / steal cores',
        '-s used',
        'secs',
      ],
      r.points.map((p) => [
        p.phase,
        p.modelName,
        p.server,
        p.proto,
        String(p.conc),
        p.ok ? rate(p.res!.throughput) : `FAILED: ${p.error ?? ''}`,
        p.res ? `${ms(p.res.p50Us)} / ${ms(p.res.p99Us)}` : '–',
        p.res?.serverRequestUs !== undefined ? `${p.res.serverRequestUs} (${p.res.queueUs} / ${p.res.computeInferUs})` : '–',
        avgBatch(p),
        p.use ? [p.use.mainCores, p.use.serverCores, p.use.loadGenCores, p.use.otherCores, p.use.stealCores].map(cores).join(' / ') : '–',
        String(p.stability),
        p.seconds.toFixed(0),
      ]),
    ),
    '',
    '</details>',
    '',
    '<details><summary>every command this run executed</summary>',
    '',
    '```sh',
    ...r.commands,
    '```',
    '',
    '</details>',
  );
  return L.join('\n');
}

export function writeDoc(file: string, generated: string): void {
  const block = `${BEGIN}\n\n${generated}\n\n${END}`;
  if (existsSync(file)) {
    const text = readFileSync(file, 'utf8');
    const i = text.indexOf(BEGIN.slice(0, 30));
    const j = text.indexOf(END);
    if (i >= 0 && j > i) {
      writeFileSync(file, text.slice(0, i) + block + text.slice(j + END.length));
      return;
    }
    writeFileSync(file, `${text.replace(/\n*$/, '\n\n')}${block}\n`);
    return;
  }
  writeFileSync(
    file,
    [
      '# Benchmarks',
      '',
      'Reproduce with `npm run build && bash tools/bench/run.sh` (full, ≈12 min) or `bash tools/bench/run.sh --quick` (≈2.5 min).',
      '',
      '## Latest run',
      '',
      block,
      '',
      '## Analysis',
      '',
      '(Hand-written; kept when the benchmark rewrites the generated section above.)',
      '',
    ].join('\n'),
  );
}

export function renderConsole(r: Results): string {
  const lines = ['Targets:'];
  for (const t of r.targets) {
    lines.push(`  ${(t.met === undefined ? 'n/a' : t.met ? 'MET' : 'MISSED').padEnd(7)} [${t.protocol}] ${t.what}: ${t.measured}`);
  }
  if (r.errors.length) lines.push('Errors:', ...r.errors.map((e) => `  ${e}`));
  return lines.join('\n');
}
