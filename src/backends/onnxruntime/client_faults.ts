// Run failures that the request caused. ONNX Runtime's Cast from string converts each element
// with std::stoll / std::stoull / std::stod (cast_op.cc) and fails the whole run with the C++
// exception's text ("... Status Message: stoll") when one element is not a number or is out of
// range. That is the client's data, not a server fault: it is answered 400 / INVALID_ARGUMENT,
// naming the input and the element. This runs only after a run failed, never on success.

/** A BYTES input of the failed run, as the strings ONNX Runtime was given. */
export interface StringFeed {
  name: string;
  strings: readonly string[];
}

type Conversion = 'stoll' | 'stoull' | 'stod';

/** ORT's failure text when converting a string element, and the C++ function that failed. */
const CONVERSION_FAILED = /Status Message: (stoll|stoull|stod)\s*$/;

/** What the model wanted each element to be, per conversion. */
const WANTED: Record<Conversion, string> = {
  stoll: 'a decimal integer',
  stoull: 'a decimal unsigned integer',
  stod: 'a number',
};
const RANGE: Record<Conversion, string> = {
  stoll: 'a 64-bit integer',
  stoull: 'a 64-bit unsigned integer',
  stod: 'a double',
};

/** C's isspace in the "C" locale: what strtoll and strtod skip before the number. */
const SPACE = '[ \\t\\n\\v\\f\\r]*';
const INTEGER = new RegExp(`^${SPACE}([+-]?)([0-9]+)`);
const HEX_FLOAT = new RegExp(`^${SPACE}([+-]?)0x([0-9a-f]*)(?:\\.([0-9a-f]*))?(?:p([+-]?[0-9]+))?`, 'i');
const DECIMAL_FLOAT = new RegExp(`^${SPACE}[+-]?(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:e[+-]?[0-9]+)?`, 'i');
const SPECIAL_FLOAT = new RegExp(`^${SPACE}[+-]?(?:inf|nan)`, 'i');

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const UINT64_MAX = (1n << 64n) - 1n;
/** The smallest normal double: glibc's strtod reports ERANGE below it (a subnormal result). */
const DBL_MIN = 2.2250738585072014e-308;

/**
 * Why std::stoll / stoull / stod would throw for `s`: 'invalid' (no number at its start),
 * 'range' (out of range), or undefined when it converts (trailing text is ignored, as in C).
 */
export function conversionFault(fn: Conversion, s: string): 'invalid' | 'range' | undefined {
  if (fn === 'stod') return doubleFault(s);
  const m = INTEGER.exec(s);
  if (!m) return 'invalid';
  const magnitude = BigInt(m[2]!);
  // strtoull takes "-N" as the negation of N, so only the magnitude is bounded.
  if (fn === 'stoull') return magnitude > UINT64_MAX ? 'range' : undefined;
  const v = m[1] === '-' ? -magnitude : magnitude;
  return v < INT64_MIN || v > INT64_MAX ? 'range' : undefined;
}

function doubleFault(s: string): 'invalid' | 'range' | undefined {
  const hex = HEX_FLOAT.exec(s);
  if (hex && (hex[2] || hex[3])) {
    const digits = `${hex[2]}${hex[3] ?? ''}`;
    const mantissa = Number.parseInt(digits.slice(0, 14), 16) * 16 ** Math.max(0, digits.length - 14);
    const exp = Number(hex[4] ?? 0) - 4 * (hex[3]?.length ?? 0);
    return inRange(mantissa, mantissa * 2 ** exp);
  }
  const dec = DECIMAL_FLOAT.exec(s);
  if (dec) {
    const text = dec[0].trimStart();
    return inRange(/[1-9]/.test(text.split(/e/i)[0]!) ? 1 : 0, Number(text));
  }
  return SPECIAL_FLOAT.test(s) ? undefined : 'invalid';
}

/** Overflow, or a nonzero number that underflows to a subnormal or zero, is ERANGE. */
function inRange(nonzero: number, v: number): 'range' | undefined {
  if (!Number.isFinite(v)) return 'range';
  return nonzero !== 0 && Math.abs(v) < DBL_MIN ? 'range' : undefined;
}

/** An element as the error text shows it: JSON-quoted, non-ASCII escaped, long ones cut. */
function quote(s: string): string {
  const cut = s.length > 40 ? `${s.slice(0, 40)}…` : s;
  return JSON.stringify(cut).replace(/[^\x20-\x7e]/g, (c) => (c === '…' ? '...' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

/**
 * The text for a failed run that the request's BYTES data caused, or undefined when the failure
 * is not a string conversion, or the run had no BYTES inputs (strings a model makes itself are
 * its own fault). Names the first element of each input that the conversion rejects; when none
 * does (the model converts strings it derived from them), names the BYTES inputs.
 */
export function stringFaultText(message: string, feeds: readonly StringFeed[], model: string): string | undefined {
  const fn = CONVERSION_FAILED.exec(message)?.[1] as Conversion | undefined;
  if (!fn || !feeds.length) return undefined;
  const found: string[] = [];
  for (const f of feeds) {
    for (let i = 0; i < f.strings.length; i++) {
      const why = conversionFault(fn, f.strings[i]!);
      if (!why) continue;
      const what = why === 'invalid' ? `is not ${WANTED[fn]}` : `is out of range for ${RANGE[fn]}`;
      found.push(`BYTES element ${i} ${quote(f.strings[i]!)} of inference input '${f.name}' for model '${model}' ${what}`);
      break;
    }
  }
  const names = feeds.map((f) => `'${f.name}'`).join(', ');
  const head = found.length
    ? found.join('; ')
    : `an element of BYTES inference input ${names} for model '${model}' (or a string the model made of it) is not ${WANTED[fn]} or is out of range`;
  return `${head}: the model converts it with ${fn} (ONNX Runtime: ${message})`;
}
