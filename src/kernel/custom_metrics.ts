// Custom metrics of Python models (pb_utils.MetricFamily / Metric), exported on /metrics with the
// names, HELP texts, kinds and labels the models give, as Triton does. Families are the server's:
// two models may share one (same name and kind), and a metric with the same labels is the same
// series. The stubs send their updates here (backends/python/instance.ts); a stub's metrics go when
// it does. In the kernel because the Python backend writes it and the metrics front-end reads it.

export type MetricKind = 'COUNTER' | 'GAUGE' | 'HISTOGRAM';

interface Series {
  labels: Record<string, string>;
  value: number;
  /** A histogram's upper bounds, its per-bucket counts (the last is +Inf) and its sum. */
  bounds?: number[];
  counts?: number[];
  sum?: number;
  owners: Set<object>;
}

interface Family {
  help: string;
  kind: MetricKind;
  series: Map<string, Series>;
  owners: Set<object>;
}

/** Prometheus's text form of a sample value (prometheus-cpp writes 6, 2.5, +Inf). */
function num(v: number): string {
  if (v === Number.POSITIVE_INFINITY) return '+Inf';
  if (v === Number.NEGATIVE_INFINITY) return '-Inf';
  return Number.isNaN(v) ? 'NaN' : String(v);
}

function labelText(labels: Record<string, string>, extra?: [string, string]): string {
  const pairs = Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (extra) pairs.push(extra);
  if (!pairs.length) return '';
  const esc = (v: string): string => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
  return `{${pairs.map(([k, v]) => `${k}="${esc(v)}"`).join(',')}}`;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

export class CustomMetrics {
  private readonly families = new Map<string, Family>();

  /** A family for `owner`; refused when the name is taken by another kind (Triton's text). */
  family(owner: object, name: string, help: string, kind: MetricKind): string | undefined {
    if (!NAME.test(name)) return `'${name}' is not a valid metric name`;
    const f = this.families.get(name);
    if (f) {
      if (f.kind !== kind) return 'Family name already exists with different type';
      f.owners.add(owner);
      return undefined;
    }
    this.families.set(name, { help, kind, series: new Map(), owners: new Set([owner]) });
    return undefined;
  }

  /** A metric of a family: its key, or the reason it cannot be. */
  metric(owner: object, family: string, labels: Record<string, string>, buckets: number[] | null): { key?: string; err?: string } {
    const f = this.families.get(family);
    if (!f) return { err: `no metric family '${family}'` };
    for (const k of Object.keys(labels)) if (!NAME.test(k) || k.startsWith('__')) return { err: `'${k}' is not a valid label name` };
    const id = labelText(labels);
    const key = `${family}${id}`;
    let s = f.series.get(id);
    if (!s) {
      s = { labels: { ...labels }, value: 0, owners: new Set() };
      if (f.kind === 'HISTOGRAM') {
        s.bounds = [...new Set(buckets ?? [])].sort((a, b) => a - b);
        s.counts = new Array<number>(s.bounds.length + 1).fill(0);
        s.sum = 0;
      }
      f.series.set(id, s);
    }
    s.owners.add(owner);
    return { key };
  }

  private find(key: string): [Family, Series] | undefined {
    const brace = key.indexOf('{');
    const name = brace < 0 ? key : key.slice(0, brace);
    const f = this.families.get(name);
    const s = f?.series.get(key.slice(name.length));
    return f && s ? [f, s] : undefined;
  }

  /** increment / set / observe; the stub has checked the kind and the sign already. */
  update(key: string, op: string, value: number): void {
    const found = this.find(key);
    if (!found || !Number.isFinite(value)) return;
    const [f, s] = found;
    if (op === 'increment' && f.kind !== 'HISTOGRAM') s.value += value;
    else if (op === 'set' && f.kind === 'GAUGE') s.value = value;
    else if (op === 'observe' && f.kind === 'HISTOGRAM') {
      const i = s.bounds!.findIndex((b) => value <= b);
      s.counts![i < 0 ? s.bounds!.length : i]! += 1;
      s.sum! += value;
    }
  }

  value(key: string): number | undefined {
    return this.find(key)?.[1].value;
  }

  /** What `owner` (a stub) created goes with it, unless another owner shares it. */
  release(owner: object): void {
    for (const [name, f] of this.families) {
      for (const [id, s] of f.series) {
        s.owners.delete(owner);
        if (!s.owners.size) f.series.delete(id);
      }
      f.owners.delete(owner);
      if (!f.owners.size && !f.series.size) this.families.delete(name);
    }
  }

  /** The families in Prometheus's text format (a histogram as _count, _sum, then its buckets). */
  render(): string {
    const lines: string[] = [];
    for (const [name, f] of this.families) {
      lines.push(`# HELP ${name} ${f.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${name} ${f.kind.toLowerCase()}`);
      for (const s of f.series.values()) {
        if (f.kind !== 'HISTOGRAM') {
          lines.push(`${name}${labelText(s.labels)} ${num(s.value)}`);
          continue;
        }
        const total = s.counts!.reduce((a, b) => a + b, 0);
        lines.push(`${name}_count${labelText(s.labels)} ${total}`, `${name}_sum${labelText(s.labels)} ${num(s.sum!)}`);
        let below = 0;
        s.bounds!.forEach((b, i) => {
          below += s.counts![i]!;
          lines.push(`${name}_bucket${labelText(s.labels, ['le', num(b)])} ${below}`);
        });
        lines.push(`${name}_bucket${labelText(s.labels, ['le', '+Inf'])} ${total}`);
      }
    }
    return lines.length ? `${lines.join('\n')}\n` : '';
  }
}

/** The server's custom metrics (one per process: a server is one process). */
export const pythonCustomMetrics = new CustomMetrics();
