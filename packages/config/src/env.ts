/**
 * `${NAME}` and `${NAME:-default}` references in configuration values.
 *
 * Substitution happens on parsed YAML scalars, never on the file's text, so a value from
 * the environment cannot change the structure of the document. `$${` writes a literal `${`.
 */
const REF = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

export type EnvLookup = (name: string) => string | undefined;

export class MissingEnvError extends Error {
  constructor(readonly variable: string) {
    super(`environment variable ${variable} is not set (write \${${variable}:-default} to give a default)`);
  }
}

/** Expands references in one string; throws MissingEnvError for an unset name without default. */
export function expandEnv(value: string, env: EnvLookup): string {
  if (!value.includes('${')) return value;
  return value.replace(REF, (whole: string, name: string | undefined, fallback: string | undefined) => {
    if (name === undefined) return '${';
    const v = env(name);
    if (v !== undefined && v !== '') return v;
    if (fallback !== undefined) return fallback;
    if (v === '') return '';
    throw new MissingEnvError(name);
  });
}
