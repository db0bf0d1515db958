// backends/onnxruntime/client_faults.ts: which failed runs are the client's fault, and the text.
// The emulation of std::stoll / stoull / stod is checked against ONNX Runtime itself: for every
// sample, the run fails exactly when the emulation says the element does not convert.
import ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { conversionFault, stringFaultText } from '../../src/backends/onnxruntime/client_faults.js';
import { DataType, type ElemType, GraphBuilder } from '../../tools/onnx/builder.js';

const SAMPLES = [
  '1',
  '',
  'abc',
  ' 12',
  '\t\n\v\f\r7',
  '\u00a01', // a no-break space is not C whitespace
  '12abc',
  '-1',
  '+5',
  '-',
  '+',
  '.',
  '.5',
  '5.',
  '0x10',
  '0x',
  '0x1p3',
  '0x.8p1',
  '0x1p99999',
  '0x1p-99999',
  '9223372036854775807',
  '9223372036854775808',
  '-9223372036854775808',
  '-9223372036854775809',
  '18446744073709551615',
  '18446744073709551616',
  '-18446744073709551615',
  '-18446744073709551616',
  '99999999999999999999',
  '1e308',
  '1e309',
  '1e400',
  '-1e400',
  '1e-40',
  '1e-307',
  '1e-310',
  '1e-400',
  '0e-400',
  '0.0000e999',
  '1e',
  '1e+',
  'inf',
  '-Infinity',
  'nan',
  'NaN(abc)',
  'true',
  '\ufffd',
  '٣', // an Arabic-Indic digit is not a C digit
];

const sessions: ort.InferenceSession[] = [];
afterAll(async () => {
  for (const s of sessions) await s.release();
});

async function castModel(to: number, elem: ElemType): Promise<ort.InferenceSession> {
  const g = new GraphBuilder('cast');
  g.input('X', 'string', [1]);
  g.op('Cast', ['X'], { to }, 'Y');
  g.output('Y', elem, [1]);
  const s = await ort.InferenceSession.create(Buffer.from(g.encode({})));
  sessions.push(s);
  return s;
}

describe('conversionFault agrees with ONNX Runtime’s Cast from string', () => {
  const cases = [
    { fn: 'stoll', to: DataType.INT64, elem: 'int64' },
    { fn: 'stoll', to: DataType.INT8, elem: 'int8' },
    { fn: 'stoull', to: DataType.UINT64, elem: 'uint64' },
    { fn: 'stod', to: DataType.DOUBLE, elem: 'float64' },
    { fn: 'stod', to: DataType.FLOAT, elem: 'float32' },
  ] as const;
  for (const c of cases) {
    it(`${c.elem} (${c.fn})`, async () => {
      const session = await castModel(c.to, c.elem);
      const disagreements: string[] = [];
      for (const s of SAMPLES) {
        let ortMessage: string | undefined;
        try {
          await session.run({ X: new ort.Tensor('string', [s], [1]) }, ['Y'], { logSeverityLevel: 4 });
        } catch (e) {
          ortMessage = (e as Error).message;
        }
        const ours = conversionFault(c.fn, s);
        if ((ortMessage !== undefined) !== (ours !== undefined))
          disagreements.push(`${JSON.stringify(s)}: ORT ${ortMessage ?? 'ok'}, ours ${ours ?? 'ok'}`);
        // Every failure ORT reports for a string element is one the mapping recognises.
        if (ortMessage) expect(stringFaultText(ortMessage, [{ name: 'X', strings: [s] }], 'cast')).toBeDefined();
      }
      expect(disagreements).toEqual([]);
    });
  }

  it('tells an element that is no number from one out of range', () => {
    expect(conversionFault('stoll', 'abc')).toBe('invalid');
    expect(conversionFault('stoll', '')).toBe('invalid');
    expect(conversionFault('stoll', '99999999999999999999')).toBe('range');
    expect(conversionFault('stoull', '-18446744073709551616')).toBe('range');
    expect(conversionFault('stod', '1e400')).toBe('range');
    expect(conversionFault('stod', '1e-310')).toBe('range');
    expect(conversionFault('stod', '.')).toBe('invalid');
    expect(conversionFault('stoll', '42 apples')).toBeUndefined();
  });
});

describe('stringFaultText', () => {
  const cast = "Non-zero status code returned while running Cast node. Name:'Cast_0' Status Message: stoll";

  it('names the input, the element, its value and why, and keeps ONNX Runtime’s text', () => {
    const ok = Array.from({ length: 16 }, (_, i) => String(i));
    const bad = [...ok.slice(0, 3), 'abc', ...ok.slice(4)];
    expect(
      stringFaultText(
        cast,
        [
          { name: 'INPUT0', strings: ok },
          { name: 'INPUT1', strings: bad },
        ],
        'simple_string',
      ),
    ).toBe(
      `BYTES element 3 "abc" of inference input 'INPUT1' for model 'simple_string' is not a decimal integer: the model converts it with stoll (ONNX Runtime: ${cast})`,
    );
    expect(stringFaultText(cast, [{ name: 'A', strings: ['1', '99999999999999999999'] }], 'm')).toContain(
      `BYTES element 1 "99999999999999999999" of inference input 'A' for model 'm' is out of range for a 64-bit integer`,
    );
  });

  it('names every input that holds a bad element, each by its first one', () => {
    const text = stringFaultText(
      cast,
      [
        { name: 'A', strings: ['x', 'y'] },
        { name: 'B', strings: ['1', ''] },
      ],
      'm',
    );
    expect(text).toMatch(
      /^BYTES element 0 "x" of inference input 'A' for model 'm' is not a decimal integer; BYTES element 1 "" of inference input 'B'/,
    );
  });

  it('escapes what is not printable ASCII (a lone surrogate arrives as U+FFFD) and cuts long elements', () => {
    expect(stringFaultText(cast, [{ name: 'A', strings: ['\ufffd'] }], 'm')).toContain('BYTES element 0 "\\ufffd" of');
    const long = stringFaultText(cast, [{ name: 'A', strings: ['z'.repeat(1000)] }], 'm')!;
    expect(long).toContain(`"${'z'.repeat(40)}..."`);
    expect(long.length).toBeLessThan(400);
  });

  it('when no element fails the conversion itself (the model converts strings it made), names the BYTES inputs', () => {
    expect(
      stringFaultText(
        cast.replace('stoll', 'stod'),
        [
          { name: 'A', strings: ['1'] },
          { name: 'B', strings: ['2'] },
        ],
        'm',
      ),
    ).toMatch(/^an element of BYTES inference input 'A', 'B' for model 'm' \(or a string the model made of it\) is not a number/);
  });

  it('is not a client fault without BYTES inputs, or for any other failure', () => {
    expect(stringFaultText(cast, [], 'm')).toBeUndefined();
    expect(
      stringFaultText(
        'Non-zero status code returned while running Add node. Status Message: shape mismatch',
        [{ name: 'A', strings: ['x'] }],
        'm',
      ),
    ).toBeUndefined();
    expect(stringFaultText('stoll', [{ name: 'A', strings: ['x'] }], 'm')).toBeUndefined();
  });
});
