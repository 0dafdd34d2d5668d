export { redactJson, redactText } from './redact.js';
export type { RedactJsonOptions } from './redact.js';
export { redactSecrets, classifyToken } from './secrets.js';
export { redactPersonal } from './personal.js';
export { SECRET_KINDS, addCounts, isPlaceholder, placeholderOf } from './types.js';
export type {
  JsonRedaction,
  JsonValue,
  PersonalType,
  RedactionCounts,
  RedactionPolicy,
  RedactionType,
  SecretKind,
  SecretType,
  TextRedaction,
} from './types.js';
export { RedactError } from './errors.js';
export type { RedactErrorCode } from './errors.js';
