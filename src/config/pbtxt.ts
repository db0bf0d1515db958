// Protobuf text-format parser (the config.pbtxt syntax) driven by a
// protobufjs Type. It follows the grammar accepted by the C++
// google::protobuf::TextFormat parser that Triton uses, so a file Triton
// accepts parses here to the same message, and a file Triton rejects is
// rejected here with a positioned PbtxtError.

import type protobuf from 'protobufjs';
import {
  describeMessage,
  type FieldSpec,
  INTEGER_RANGES,
  type MessageSpec,
  ModelConfigType,
  mapEntryName,
  roundToFloat32,
  type ScalarTypeName,
  setOwn,
  type ValueSpec,
} from './schema.js';
import type { ModelConfig } from './types.js';

/** A syntax or schema error at a known position of a text-format file. */
export class PbtxtError extends Error {
  readonly file: string;
  /** 1-based. */
  readonly line: number;
  /** 1-based, counted in UTF-16 code units. */
  readonly column: number;
  /** The message without the "file:line:col: " prefix. */
  readonly reason: string;

  constructor(file: string, line: number, column: number, reason: string) {
    super(`${file}:${line}:${column}: ${reason}`);
    this.name = 'PbtxtError';
    this.file = file;
    this.line = line;
    this.column = column;
    this.reason = reason;
  }
}

// ---------------------------------------------------------------------------
// Tokenizer

type TokenKind = 'ident' | 'int' | 'float' | 'string' | 'symbol' | 'eof';

interface Token {
  kind: TokenKind;
  /** Source text (for strings: the quoted literal). */
  text: string;
  line: number;
  column: number;
  /** Decoded bytes of a string literal. */
  bytes?: Buffer;
}

const SYMBOLS = new Set(['{', '}', '<', '>', '[', ']', ':', ',', ';', '-', '/', '.']);

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}
function isHexDigit(c: string | undefined): boolean {
  return c !== undefined && /^[0-9a-fA-F]$/.test(c);
}
function isIdentStart(c: string | undefined): boolean {
  return c !== undefined && /^[A-Za-z_]$/.test(c);
}
function isIdentPart(c: string | undefined): boolean {
  return c !== undefined && /^[A-Za-z0-9_]$/.test(c);
}

const SIMPLE_ESCAPES: Readonly<Record<string, number>> = {
  a: 0x07,
  b: 0x08,
  f: 0x0c,
  n: 0x0a,
  r: 0x0d,
  t: 0x09,
  v: 0x0b,
  '\\': 0x5c,
  '?': 0x3f,
  "'": 0x27,
  '"': 0x22,
};

class Tokenizer {
  private pos = 0;
  private line = 1;
  private column = 1;

  constructor(
    private readonly text: string,
    private readonly file: string,
  ) {}

  private fail(line: number, column: number, reason: string): never {
    throw new PbtxtError(this.file, line, column, reason);
  }

  private peekChar(offset = 0): string | undefined {
    return this.text[this.pos + offset];
  }

  private advance(): string {
    const c = this.text[this.pos++] as string;
    if (c === '\n') {
      this.line++;
      this.column = 1;
    } else {
      this.column++;
    }
    return c;
  }

  private skipSpaceAndComments(): void {
    for (;;) {
      const c = this.peekChar();
      if (c === undefined) return;
      if (c === '#') {
        while (this.peekChar() !== undefined && this.peekChar() !== '\n') this.advance();
      } else if (/\s/.test(c)) {
        this.advance();
      } else {
        return;
      }
    }
  }

  next(): Token {
    this.skipSpaceAndComments();
    const line = this.line;
    const column = this.column;
    const c = this.peekChar();
    if (c === undefined) return { kind: 'eof', text: '', line, column };

    if (isIdentStart(c)) {
      const start = this.pos;
      while (isIdentPart(this.peekChar())) this.advance();
      return { kind: 'ident', text: this.text.slice(start, this.pos), line, column };
    }
    if (isDigit(c) || (c === '.' && isDigit(this.peekChar(1)))) {
      return this.readNumber(line, column);
    }
    if (c === '"' || c === "'") return this.readString(line, column);
    if (SYMBOLS.has(c)) {
      this.advance();
      return { kind: 'symbol', text: c, line, column };
    }
    return this.fail(line, column, `unexpected character ${JSON.stringify(c)}`);
  }

  // Mirrors protobuf's tokenizer: 0x.. hex, 0.. octal, decimals with an
  // optional fraction/exponent and an optional f/F suffix marking a float.
  private readNumber(line: number, column: number): Token {
    const start = this.pos;
    let isFloat = false;
    if (this.peekChar() === '0' && (this.peekChar(1) === 'x' || this.peekChar(1) === 'X')) {
      this.advance();
      this.advance();
      if (!isHexDigit(this.peekChar())) this.fail(line, column, '"0x" must be followed by hex digits');
      while (isHexDigit(this.peekChar())) this.advance();
    } else if (this.peekChar() === '0' && isDigit(this.peekChar(1))) {
      while (isDigit(this.peekChar())) this.advance();
      const digits = this.text.slice(start, this.pos);
      if (/[89]/.test(digits)) this.fail(line, column, `numbers starting with a leading zero must be octal: ${digits}`);
    } else {
      while (isDigit(this.peekChar())) this.advance();
      if (this.peekChar() === '.') {
        isFloat = true;
        this.advance();
        while (isDigit(this.peekChar())) this.advance();
      }
      if (this.peekChar() === 'e' || this.peekChar() === 'E') {
        isFloat = true;
        this.advance();
        if (this.peekChar() === '+' || this.peekChar() === '-') this.advance();
        if (!isDigit(this.peekChar())) this.fail(this.line, this.column, 'exponent must have digits');
        while (isDigit(this.peekChar())) this.advance();
      }
      if (this.peekChar() === 'f' || this.peekChar() === 'F') {
        isFloat = true;
        this.advance();
      }
    }
    if (isIdentPart(this.peekChar()) || this.peekChar() === '.') {
      this.fail(this.line, this.column, 'need space between number and identifier');
    }
    return { kind: isFloat ? 'float' : 'int', text: this.text.slice(start, this.pos), line, column };
  }

  private readString(line: number, column: number): Token {
    const quote = this.advance();
    const start = this.pos - 1;
    const bytes: number[] = [];
    for (;;) {
      const c = this.peekChar();
      if (c === undefined) this.fail(line, column, 'unterminated string literal');
      if (c === '\n') this.fail(line, column, 'string literals cannot cross line boundaries');
      if (c === quote) {
        this.advance();
        break;
      }
      if (c !== '\\') {
        // Take a whole code point so surrogate pairs encode correctly.
        const cp = this.text.codePointAt(this.pos) as number;
        const ch = String.fromCodePoint(cp);
        for (let i = 0; i < ch.length; i++) this.advance();
        bytes.push(...Buffer.from(ch, 'utf8'));
        continue;
      }
      const escLine = this.line;
      const escColumn = this.column;
      this.advance();
      const e = this.peekChar();
      if (e === undefined) this.fail(line, column, 'unterminated string literal');
      const simple = SIMPLE_ESCAPES[e];
      if (simple !== undefined) {
        this.advance();
        bytes.push(simple);
      } else if (e >= '0' && e <= '7') {
        let v = 0;
        for (let i = 0; i < 3 && /[0-7]/.test(this.peekChar() ?? ''); i++) v = v * 8 + Number(this.advance());
        if (v > 0xff) this.fail(escLine, escColumn, 'octal escape out of range');
        bytes.push(v);
      } else if (e === 'x' || e === 'X') {
        this.advance();
        if (!isHexDigit(this.peekChar())) this.fail(escLine, escColumn, 'expected hex digits for escape sequence');
        let v = 0;
        for (let i = 0; i < 2 && isHexDigit(this.peekChar()); i++) v = v * 16 + parseInt(this.advance(), 16);
        bytes.push(v);
      } else if (e === 'u' || e === 'U') {
        this.advance();
        const n = e === 'u' ? 4 : 8;
        let hex = '';
        for (let i = 0; i < n; i++) {
          if (!isHexDigit(this.peekChar())) this.fail(escLine, escColumn, `expected ${n} hex digits after \\${e}`);
          hex += this.advance();
        }
        const cp = parseInt(hex, 16);
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
          this.fail(escLine, escColumn, `invalid unicode escape \\${e}${hex}`);
        }
        bytes.push(...Buffer.from(String.fromCodePoint(cp), 'utf8'));
      } else {
        this.fail(escLine, escColumn, `invalid escape sequence "\\${e}" in string literal`);
      }
    }
    return { kind: 'string', text: this.text.slice(start, this.pos), line, column, bytes: Buffer.from(bytes) };
  }
}

// ---------------------------------------------------------------------------
// Parser

const UNSIGNED = new Set(['uint32', 'fixed32', 'uint64', 'fixed64']);
const BOOL_WORDS: Readonly<Record<string, boolean>> = { true: true, True: true, t: true, false: false, False: false, f: false };
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Value of an integer token: decimal, 0x hex or leading-zero octal. */
function intTokenValue(text: string): bigint {
  if (/^0[xX]/.test(text)) return BigInt(text);
  if (text.length > 1 && text.startsWith('0')) return BigInt(`0o${text.slice(1)}`);
  return BigInt(text);
}

/** Default value of a field's value type, used for omitted map keys/values. */
function defaultValueOf(value: ValueSpec): unknown {
  switch (value.kind) {
    case 'message':
      return {};
    case 'enum':
      return value.enumType.valuesById[0] ?? Object.keys(value.enumType.values)[0];
    case 'scalar':
      return scalarDefault(value.scalar);
  }
}

function scalarDefault(scalar: ScalarTypeName): unknown {
  if (scalar === 'string') return '';
  if (scalar === 'bool') return false;
  if (scalar === 'bytes') return Buffer.alloc(0);
  return 0;
}

class Parser {
  private tok: Token;

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly file: string,
  ) {
    this.tok = tokenizer.next();
  }

  private fail(at: Token, reason: string): never {
    throw new PbtxtError(this.file, at.line, at.column, reason);
  }

  private take(): Token {
    const t = this.tok;
    this.tok = this.tokenizer.next();
    return t;
  }

  private isSymbol(s: string): boolean {
    return this.tok.kind === 'symbol' && this.tok.text === s;
  }

  private trySymbol(s: string): boolean {
    if (!this.isSymbol(s)) return false;
    this.take();
    return true;
  }

  private describe(t: Token): string {
    return t.kind === 'eof' ? 'end of input' : JSON.stringify(t.text);
  }

  private expectSymbol(s: string, context = ''): Token {
    if (!this.isSymbol(s)) this.fail(this.tok, `expected "${s}"${context}, found ${this.describe(this.tok)}`);
    return this.take();
  }

  /** Parses a whole document as one message of the given type. */
  parseDocument(spec: MessageSpec): Record<string, unknown> {
    return this.parseFields(spec, null);
  }

  /**
   * Parses fields until `close` (a closing delimiter) or, for the top
   * level (close === null), until end of input.
   */
  private parseFields(spec: MessageSpec, close: string | null): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const oneofOwner = new Map<string, string>();
    for (;;) {
      if (close === null && this.tok.kind === 'eof') return out;
      if (close !== null && this.isSymbol(close)) {
        this.take();
        return out;
      }
      if (this.tok.kind === 'eof') this.fail(this.tok, `unexpected end of input, expected "${close}"`);
      if (this.isSymbol('[')) {
        this.fail(this.tok, `extension and Any fields are not supported in ${spec.fullName}`);
      }
      if (close !== null && (this.isSymbol('}') || this.isSymbol('>'))) {
        this.fail(this.tok, `expected "${close}" to close ${spec.fullName}, found ${this.describe(this.tok)}`);
      }
      if (this.tok.kind !== 'ident') {
        this.fail(this.tok, `expected a field name, found ${this.describe(this.tok)}`);
      }
      const nameTok = this.take();
      const field = spec.byName.get(nameTok.text);
      if (!field) this.fail(nameTok, `unknown field "${nameTok.text}" in ${spec.fullName}`);
      this.parseField(spec, field, nameTok, out, oneofOwner);
      // Either separator may follow any field.
      if (!this.trySymbol(',')) this.trySymbol(';');
    }
  }

  private parseField(
    owner: MessageSpec,
    field: FieldSpec,
    nameTok: Token,
    out: Record<string, unknown>,
    oneofOwner: Map<string, string>,
  ): void {
    if (!field.repeated && Object.hasOwn(out, field.name)) {
      this.fail(nameTok, `non-repeated field "${field.name}" is specified multiple times`);
    }
    if (field.oneof !== undefined) {
      const other = oneofOwner.get(field.oneof);
      if (other !== undefined && other !== field.name) {
        this.fail(nameTok, `field "${field.name}" is specified along with field "${other}", another member of oneof "${field.oneof}"`);
      }
      oneofOwner.set(field.oneof, field.name);
    }

    const isMessageLike = field.mapKey !== undefined || field.value.kind === 'message';
    if (isMessageLike) {
      // The colon is optional before a message value.
      this.trySymbol(':');
    } else if (!this.isSymbol(':')) {
      this.fail(this.tok, `expected ":" after field "${field.name}", found ${this.describe(this.tok)}`);
    } else {
      this.take();
    }

    const readOne = (): unknown =>
      field.mapKey !== undefined
        ? this.parseMapEntry(owner, field)
        : field.value.kind === 'message'
          ? this.parseMessageValue(field.value.message, field)
          : this.parseScalar(field.value, field);

    const values: unknown[] = [];
    if (this.isSymbol('[')) {
      const open = this.take();
      if (!field.repeated) this.fail(open, `field "${field.name}" is not repeated and cannot take a list`);
      if (!this.trySymbol(']')) {
        for (;;) {
          values.push(readOne());
          if (this.trySymbol(']')) break;
          this.expectSymbol(',', ' or "]" in list');
        }
      }
    } else {
      values.push(readOne());
    }

    if (field.mapKey !== undefined) {
      out[field.name] ??= {};
      const map = out[field.name] as Record<string, unknown>;
      for (const [key, value] of values as Array<[string, unknown]>) setOwn(map, key, value);
    } else if (field.repeated) {
      out[field.name] ??= [];
      const list = out[field.name] as unknown[];
      list.push(...values);
    } else {
      out[field.name] = values[0];
    }
  }

  private openMessage(field: FieldSpec): string {
    if (this.trySymbol('{')) return '}';
    if (this.trySymbol('<')) return '>';
    return this.fail(this.tok, `expected "{" or "<" to start the value of field "${field.name}", found ${this.describe(this.tok)}`);
  }

  private parseMessageValue(spec: MessageSpec, field: FieldSpec): Record<string, unknown> {
    const close = this.openMessage(field);
    return this.parseFields(spec, close);
  }

  /** Parses `{ key: K value: V }` and returns [stringified key, value]. */
  private parseMapEntry(owner: MessageSpec, field: FieldSpec): [string, unknown] {
    const entryName = mapEntryName(owner, field);
    const keyType = field.mapKey as ScalarTypeName;
    const keySpec: FieldSpec = {
      name: 'key',
      jsonName: 'key',
      id: 1,
      repeated: false,
      value: { kind: 'scalar', scalar: keyType },
      hasPresence: false,
    };
    const valueSpec: FieldSpec = {
      name: 'value',
      jsonName: 'value',
      id: 2,
      repeated: false,
      value: field.value,
      hasPresence: field.value.kind === 'message',
    };
    const close = this.openMessage(field);
    let key: unknown;
    let value: unknown;
    let seenKey = false;
    let seenValue = false;
    for (;;) {
      if (this.trySymbol(close)) break;
      if (this.tok.kind !== 'ident') {
        this.fail(
          this.tok,
          this.tok.kind === 'eof'
            ? `unexpected end of input, expected "${close}"`
            : `expected "key" or "value" in ${entryName}, found ${this.describe(this.tok)}`,
        );
      }
      const nameTok = this.take();
      if (nameTok.text === 'key') {
        if (seenKey) this.fail(nameTok, `non-repeated field "key" is specified multiple times`);
        seenKey = true;
        this.expectSymbol(':', ` after field "key"`);
        key = this.parseScalar(keySpec.value, keySpec);
      } else if (nameTok.text === 'value') {
        if (seenValue) this.fail(nameTok, `non-repeated field "value" is specified multiple times`);
        seenValue = true;
        if (field.value.kind === 'message') {
          this.trySymbol(':');
          value = this.parseMessageValue(field.value.message, valueSpec);
        } else {
          this.expectSymbol(':', ` after field "value"`);
          value = this.parseScalar(field.value, valueSpec);
        }
      } else {
        this.fail(nameTok, `unknown field "${nameTok.text}" in ${entryName}`);
      }
      if (!this.trySymbol(',')) this.trySymbol(';');
    }
    const keyValue = seenKey ? key : scalarDefault(keyType);
    return [String(keyValue), seenValue ? value : defaultValueOf(field.value)];
  }

  private parseScalar(value: ValueSpec, field: FieldSpec): unknown {
    if (value.kind === 'enum') return this.parseEnum(value.enumType, value.enumName, field);
    if (value.kind === 'message') throw new Error('unreachable: message value in parseScalar');
    const scalar = value.scalar;
    switch (scalar) {
      case 'string':
      case 'bytes':
        return this.parseStringValue(scalar, field);
      case 'bool':
        return this.parseBool(field);
      case 'float':
      case 'double':
        return this.parseFloat(scalar, field);
      default:
        return this.parseInteger(scalar, field);
    }
  }

  private parseStringValue(scalar: 'string' | 'bytes', field: FieldSpec): string | Buffer {
    if (this.tok.kind !== 'string') {
      this.fail(this.tok, `expected a string for field "${field.name}", found ${this.describe(this.tok)}`);
    }
    const first = this.tok;
    const parts: Buffer[] = [];
    // Adjacent literals concatenate, as in C.
    while (this.tok.kind === 'string') parts.push(this.take().bytes as Buffer);
    const bytes = Buffer.concat(parts);
    if (scalar === 'bytes') return bytes;
    try {
      return utf8.decode(bytes);
    } catch {
      return this.fail(first, `string field "${field.name}" contains invalid UTF-8`);
    }
  }

  private parseBool(field: FieldSpec): boolean {
    const t = this.tok;
    if (t.kind === 'ident' && Object.hasOwn(BOOL_WORDS, t.text)) {
      this.take();
      return BOOL_WORDS[t.text] as boolean;
    }
    if (t.kind === 'int') {
      const v = intTokenValue(t.text);
      if (v !== 0n && v !== 1n) this.fail(t, `invalid value for boolean field "${field.name}": ${t.text}`);
      this.take();
      return v === 1n;
    }
    return this.fail(t, `expected true or false for boolean field "${field.name}", found ${this.describe(t)}`);
  }

  private parseFloat(scalar: 'float' | 'double', field: FieldSpec): number {
    const negative = this.trySymbol('-');
    const t = this.tok;
    let v: number;
    if (t.kind === 'float') {
      v = Number(t.text.replace(/[fF]$/, ''));
    } else if (t.kind === 'int') {
      v = Number(intTokenValue(t.text));
    } else if (t.kind === 'ident' && /^(inf|infinity)$/i.test(t.text)) {
      v = Infinity;
    } else if (t.kind === 'ident' && /^nan$/i.test(t.text)) {
      v = NaN;
    } else {
      return this.fail(t, `expected a number for field "${field.name}", found ${this.describe(t)}`);
    }
    this.take();
    if (negative) v = -v;
    return scalar === 'float' ? roundToFloat32(v) : v;
  }

  private parseInteger(scalar: ScalarTypeName, field: FieldSpec): number {
    const start = this.tok;
    const negative = this.trySymbol('-');
    const t = this.tok;
    if (t.kind !== 'int') {
      const what = t.kind === 'float' ? `a floating point number (${t.text})` : this.describe(t);
      return this.fail(t, `expected an integer for field "${field.name}", found ${what}`);
    }
    if (negative && UNSIGNED.has(scalar)) {
      this.fail(start, `negative value -${t.text} for unsigned field "${field.name}" (${scalar})`);
    }
    this.take();
    const raw = negative ? -intTokenValue(t.text) : intTokenValue(t.text);
    const [min, max] = INTEGER_RANGES[scalar] as readonly [bigint, bigint];
    const shown = (negative ? '-' : '') + t.text;
    if (raw < min || raw > max) {
      this.fail(start, `integer ${shown} out of range for field "${field.name}" (${scalar})`);
    }
    const v = Number(raw);
    if (!Number.isSafeInteger(v)) {
      this.fail(start, `integer ${shown} for field "${field.name}" (${scalar}) is not exactly representable as a JavaScript number`);
    }
    return v;
  }

  private parseEnum(enumType: protobuf.Enum, enumName: string, field: FieldSpec): string {
    const start = this.tok;
    if (start.kind === 'ident') {
      this.take();
      if (!Object.hasOwn(enumType.values, start.text)) {
        this.fail(start, `unknown enum value "${start.text}" for field "${field.name}" (${enumName})`);
      }
      return start.text;
    }
    const negative = this.trySymbol('-');
    const t = this.tok;
    if (t.kind !== 'int') {
      return this.fail(t, `expected an enum value name or number for field "${field.name}", found ${this.describe(t)}`);
    }
    this.take();
    const n = negative ? -intTokenValue(t.text) : intTokenValue(t.text);
    const name = n >= -(2n ** 31n) && n < 2n ** 31n ? enumType.valuesById[Number(n)] : undefined;
    if (name === undefined) {
      this.fail(start, `unknown enum number ${negative ? '-' : ''}${t.text} for field "${field.name}" (${enumName})`);
    }
    return name;
  }
}

/**
 * Parses protobuf text format into a plain object shaped like `type`:
 * snake_case keys, enum values as names, 64-bit integers as (safe) numbers,
 * bytes as Buffer, maps as objects keyed by the stringified map key.
 * Fields absent from the text are absent from the result.
 *
 * @throws PbtxtError on any syntax, schema or range problem.
 */
export function parseTextProto(text: string, type: protobuf.Type, fileName = '<input>'): Record<string, unknown> {
  const parser = new Parser(new Tokenizer(text, fileName), fileName);
  return parser.parseDocument(describeMessage(type));
}

/** Parses a config.pbtxt into an inference.ModelConfig object. */
export function parseModelConfigText(text: string, fileName = 'config.pbtxt'): ModelConfig {
  return parseTextProto(text, ModelConfigType, fileName) as ModelConfig;
}
