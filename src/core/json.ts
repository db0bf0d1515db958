// JSON encoding that keeps 64-bit integers exact: ExactInteger values (from rawToJson) are
// written as bare digits instead of being rounded through a double.
import { ExactInteger } from './datatypes.js';

const MARK = '\u0000#';
const MARKED = /"\\u0000#(-?\d+)"/g;

export function encodeJson(value: unknown): string {
  let exact = false;
  const text = JSON.stringify(value, (_k, v: unknown) => {
    if (v instanceof ExactInteger) {
      exact = true;
      return MARK + v.value.toString();
    }
    if (typeof v === 'bigint') {
      exact = true;
      return MARK + v.toString();
    }
    return v;
  });
  return exact ? text.replace(MARKED, '$1') : text;
}
