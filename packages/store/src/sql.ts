/**
 * The one place values become SQL text.
 *
 * ClickHouse 18.16 has no server-side query parameters, so every value is bound into a
 * query by `sql` below and nowhere else: strings are quoted with ClickHouse's escapes
 * (https://clickhouse.com/docs/en/sql-reference/syntax#string), numbers must be finite,
 * identifiers must be plain names. Anything else throws instead of producing text.
 */

/** A piece of SQL that is inserted as it is: identifiers and trusted fragments only. */
export class SqlFragment {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

export type SqlValue = string | number | bigint | boolean | null | Date | SqlFragment | readonly SqlValue[];

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A database, table or column name; throws for anything but a plain identifier. */
export function ident(name: string): SqlFragment {
  if (!IDENT.test(name)) throw new TypeError(`not a plain SQL identifier: ${JSON.stringify(name)}`);
  return new SqlFragment(name);
}

/** `database.table`, both checked as identifiers. */
export function table(database: string, name: string): SqlFragment {
  return new SqlFragment(`${ident(database).text}.${ident(name).text}`);
}

const ESCAPES: Record<string, string> = {
  '\\': '\\\\',
  "'": "\\'",
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\0': '\\0',
};

/** Formats one value as a ClickHouse literal. */
export function literal(v: SqlValue): string {
  if (v === null) return 'NULL';
  if (v instanceof SqlFragment) return v.text;
  switch (typeof v) {
    case 'string':
      return `'${v.replace(/[\\'\n\r\t\0]/g, (c) => ESCAPES[c] ?? c)}'`;
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`cannot bind a non-finite number: ${v}`);
      return String(v);
    case 'bigint':
      return v.toString();
    case 'boolean':
      return v ? '1' : '0';
    default:
      break;
  }
  if (v instanceof Date) {
    const ms = v.getTime();
    if (!Number.isFinite(ms)) throw new TypeError('cannot bind an invalid Date');
    return `toDateTime(${Math.floor(ms / 1000)}, 'UTC')`;
  }
  if (Array.isArray(v)) return `[${v.map(literal).join(', ')}]`;
  throw new TypeError(`cannot bind a value of type ${typeof v}`);
}

/**
 * Tagged template: sql`SELECT * FROM ${table(db, 'spans')} WHERE trace_id = ${id}`.
 * Interpolated values are literals; SqlFragments are inserted as they are.
 */
export function sql(strings: TemplateStringsArray, ...values: SqlValue[]): string {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) {
    out += literal(values[i] as SqlValue) + (strings[i + 1] ?? '');
  }
  return out;
}
