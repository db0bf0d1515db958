import { describe, expect, it } from 'vitest';
import { IdTable, InFlight, InOrder } from '../../src/kernel/churn.js';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('InFlight', () => {
  it('is idle at once when nothing runs', async () => {
    const f = new InFlight();
    let idle = false;
    void f.idle().then(() => (idle = true));
    await turn();
    expect(idle).toBe(true);
  });

  it('waits for every started piece of work, rejected ones included', async () => {
    const f = new InFlight();
    let ok!: () => void;
    let bad!: (e: Error) => void;
    const a = new Promise<void>((r) => (ok = r));
    const b = new Promise<void>((_, r) => (bad = r));
    b.catch(() => undefined);
    f.track(a);
    f.track(b);
    f.start();
    expect(f.size).toBe(3);
    let idle = false;
    void f.idle().then(() => (idle = true));
    ok();
    bad(new Error('x'));
    await turn();
    expect(f.size).toBe(1);
    expect(idle).toBe(false);
    f.end();
    await turn();
    expect(idle).toBe(true);
  });
});

describe('IdTable', () => {
  it('maps ids to values and forgets deleted ones', () => {
    const t = new IdTable<string>();
    t.set(7, 'a');
    t.set(9, 'b');
    expect(t.size).toBe(2);
    expect(t.get(7)).toBe('a');
    expect(t.has(9)).toBe(true);
    expect(t.delete(7)).toBe(true);
    expect(t.delete(7)).toBe(false);
    expect(t.get(7)).toBeUndefined();
    expect(t.has(7)).toBe(false);
    expect(t.size).toBe(1);
  });

  it('reuses a freed slot without disturbing the others', () => {
    const t = new IdTable<string>();
    for (let id = 1; id <= 5; id++) t.set(id, `v${id}`);
    t.delete(2);
    t.delete(4);
    t.set(10, 'v10');
    t.set(11, 'v11');
    t.set(12, 'v12');
    expect([1, 3, 5, 10, 11, 12].map((id) => t.get(id))).toEqual(['v1', 'v3', 'v5', 'v10', 'v11', 'v12']);
    expect(t.get(2)).toBeUndefined();
    expect(t.get(4)).toBeUndefined();
  });

  it('replaces the value of an id set again', () => {
    const t = new IdTable<string>();
    t.set(3, 'old');
    t.set(3, 'new');
    expect(t.size).toBe(1);
    expect(t.get(3)).toBe('new');
  });

  it('lists values and keys in insertion order, as copies that survive changes', () => {
    const t = new IdTable<string>();
    t.set(5, 'e');
    t.set(1, 'a');
    t.set(3, 'c');
    t.delete(1);
    t.set(2, 'b');
    const values = t.values();
    const keys = t.keys();
    expect(values).toEqual(['e', 'c', 'b']);
    expect(keys).toEqual([5, 3, 2]);
    for (const k of keys) t.delete(k);
    expect(values).toEqual(['e', 'c', 'b']);
    expect(t.size).toBe(0);
    expect(t.values()).toEqual([]);
  });

  it('clears everything', () => {
    const t = new IdTable<number>();
    t.set(1, 10);
    t.set(2, 20);
    t.clear();
    expect(t.size).toBe(0);
    expect(t.get(1)).toBeUndefined();
    t.set(4, 40);
    expect(t.values()).toEqual([40]);
  });
});

describe('InOrder', () => {
  it('runs deliveries in order, holding later ones until the earlier arrive', () => {
    const o = new InOrder();
    const ran: number[] = [];
    o.deliver(2, () => ran.push(2));
    o.deliver(1, () => ran.push(1));
    expect(ran).toEqual([]);
    o.deliver(0, () => ran.push(0));
    expect(ran).toEqual([0, 1, 2]);
    o.deliver(4, () => ran.push(4));
    expect(ran).toEqual([0, 1, 2]);
    o.deliver(3, () => ran.push(3));
    expect(ran).toEqual([0, 1, 2, 3, 4]);
  });

  it('takes a delivery made from inside another', () => {
    const o = new InOrder();
    const ran: number[] = [];
    o.deliver(0, () => {
      ran.push(0);
      o.deliver(1, () => ran.push(1));
    });
    expect(ran).toEqual([0, 1]);
    o.deliver(2, () => ran.push(2));
    expect(ran).toEqual([0, 1, 2]);
  });
});
