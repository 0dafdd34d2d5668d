/**
 * The one place values become SQL text.
 *
 * ClickHouse 18.16 has no server-side query parameters, so every value is bound into a
 * query by `sql` below and nowhere else: strings are quoted with ClickHouse's escapes
 * (https://clickhouse.com/docs/en/sql-reference/syntax#string), numbers must be finite,
 * identifiers must be plain names. Anything else throws instead of producing text.
 *
 * Statements are `Sql` values, and `Store.query`/`command` take nothing else. The class is
 * exported as a type only, and its private field makes it nominal, so the compiler lets
 * only this module make one: `sql`…``, `ident`, `table`, `join` and, for the migration
 * files, `trustedSql`. Concatenating fragments (`where += sql`…``) gives a string, which
 * the compiler refuses where SQL is expected (issue 9).
 */

/** A piece of SQL built by this module. Interpolated into `sql`…`` as it is. */
class Sql {
  readonly #text: string;
  constructor(text: string) {
    this.#text = text;
  }
  /** The SQL text, e.g. to send it or to look at it in a test. */
  get text(): string {
    return this.#text;
  }
  toString(): string {
    return this.#text;
  }
}

export type { Sql };

export type SqlValue = string | number | bigint | boolean | null | Date | Sql | readonly SqlValue[];

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A database, table or column name; throws for anything but a plain identifier. */
export function ident(name: string): Sql {
  if (!IDENT.test(name)) throw new TypeError(`not a plain SQL identifier: ${JSON.stringify(name)}`);
  return new Sql(name);
}

/** `database.table`, both checked as identifiers. */
export function table(database: string, name: string): Sql {
  return new Sql(`${ident(database).text}.${ident(name).text}`);
}

/** Fragments joined by a separator, e.g. conditions: join(conds, sql` AND `). */
export function join(fragments: readonly Sql[], separator: Sql): Sql {
  return new Sql(fragments.map((f) => f.text).join(separator.text));
}

/**
 * Text taken as SQL without checks. Only for the statements of the migration files
 * (`migrations/*.sql`, read by migrate.ts from the repository), which are trusted the way
 * code is; it is deliberately not exported from the package.
 */
export function trustedSql(text: string): Sql {
  return new Sql(text);
}

const ESCAPES: Record<string, string> = {
  '\\': '\\\\',
  "'": "\\'",
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\0': '\\0',
};

/** Formats one value as a ClickHouse literal; a fragment is inserted as it is. */
export function literal(v: SqlValue): string {
  if (v === null) return 'NULL';
  if (v instanceof Sql) return v.text;
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
 * Interpolated values are literals; fragments (`Sql`) are inserted as they are.
 */
export function sql(strings: TemplateStringsArray, ...values: SqlValue[]): Sql {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) {
    out += literal(values[i] as SqlValue) + (strings[i + 1] ?? '');
  }
  return new Sql(out);
}
