// JSON encoding that keeps 64-bit integers exact: ExactInteger values (from rawToJson) are
// written as bare digits instead of being rounded through a double.
import { ExactInteger, floatText, isFloatArray } from './datatypes.js';

/**
 * Numbers that JSON.stringify/JSON.parse cannot carry exactly travel as marked strings. The
 * marker holds a fresh random nonce per call, so no string a client sends can pass for one.
 */
function nonce(): string {
  return Math.random().toString(36).slice(2, 12);
}

export function encodeJson(value: unknown): string {
  let exact = false;
  const MARK = `\u0000${nonce()}#`;
  const text = JSON.stringify(value, (_k, v: unknown) => {
    if (v instanceof ExactInteger) {
      exact = true;
      return MARK + v.value.toString();
    }
    if (isFloatArray(v)) {
      // Float tensor data, written as Triton writes it (datatypes.ts floatText).
      exact = true;
      let text = '[';
      for (let i = 0; i < v.length; i++) text += (i ? ',' : '') + floatText(v[i]!);
      return `${MARK + text}]`;
    }
    if (v === 0 && Object.is(v, -0)) {
      // JSON.stringify writes -0 as 0; Triton keeps the sign.
      exact = true;
      return `${MARK}-0.0`;
    }
    if (typeof v === 'bigint') {
      exact = true;
      return MARK + v.toString();
    }
    return v;
  });
  if (!exact) return text;
  // A marked value is digits, signs, dots, exponents, or a float array's brackets, commas and nulls: never a quote.
  const marked = new RegExp(`"\\\\u0000${MARK.slice(1, -1)}#([^"]*)"`, 'g');
  return text.replace(marked, '$1');
}

const LONG_INTEGER = /\d{16}/;

/**
 * JSON.parse that keeps integers of 16+ digits exact (as bigint): INT64/UINT64 tensor data in
 * JSON may exceed 2^53. Numbers are rewritten only outside strings, and only when the text has
 * such a digit run at all, so ordinary requests take the plain JSON.parse path.
 */
export function parseJsonExact(text: string): unknown {
  if (!LONG_INTEGER.test(text)) return JSON.parse(text);
  const tag = nonce();
  const MARK = `\u0000${tag}#`;
  let out = '';
  let last = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
      continue;
    }
    if (c === 34) {
      inString = true;
      continue;
    }
    if (c === 45 /* - */ || (c >= 48 && c <= 57)) {
      // Consume the whole number token; only a plain integer of 16+ digits is rewritten.
      let j = i + 1;
      let integer = true;
      for (; j < text.length; j++) {
        const d = text.charCodeAt(j);
        if (d >= 48 && d <= 57) continue;
        if (d === 46 || d === 101 || d === 69 || d === 43 || d === 45) integer = false;
        else break;
      }
      if (integer && j - i - (c === 45 ? 1 : 0) >= 16) {
        out += `${text.slice(last, i)}"\\u0000${tag}#${text.slice(i, j)}"`;
        last = j;
      }
      i = j - 1;
    }
  }
  out += text.slice(last);
  const doc: unknown = JSON.parse(out);
  // The marked strings are replaced by a walk with its own stack, not a reviver: JSON.parse's
  // reviver recurses, so a deeply nested body (which JSON.parse itself takes) would overflow it.
  const exact = (v: unknown): unknown => (typeof v === 'string' && v.startsWith(MARK) ? exactOrNumber(v.slice(MARK.length)) : v);
  const todo: unknown[] = [doc];
  for (let node = todo.pop(); node !== undefined; node = todo.pop()) {
    if (typeof node !== 'object' || node === null) continue;
    const o = node as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      const v = o[k];
      if (typeof v === 'object' && v !== null) todo.push(v);
      else if (typeof v === 'string') o[k] = exact(v);
    }
  }
  return exact(doc);
}

function exactOrNumber(digits: string): number | bigint {
  const n = Number(digits);
  return Number.isSafeInteger(n) ? n : BigInt(digits);
}
