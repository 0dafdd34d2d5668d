/**
 * JSON schemas shared by the routes: they validate requests (fastify `schema`), shape
 * responses, and are the OpenAPI document (openapi.ts). Written in the part of JSON Schema
 * that draft-07 (fastify's ajv) and 2020-12 (OpenAPI 3.1) read the same way.
 */
import type { JsonSchema } from './openapi.js';

/** `{"error":{"code","message","field"?}}` (errors.ts). */
export const ERROR_SCHEMA = {
  type: 'object',
  required: ['error'],
  additionalProperties: false,
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      additionalProperties: false,
      properties: {
        code: { type: 'string', enum: ['bad_parameter', 'unauthorized', 'forbidden', 'not_found', 'query_too_large', 'store_unavailable', 'internal_error', 'not_implemented'] },
        message: { type: 'string' },
        field: { type: 'string', description: 'The request field at fault (`limit`, `metrics[2]`, `filters.model`), when one is' },
      },
    },
  },
} as const satisfies JsonSchema;

/** Every route answers its errors in one shape: refusals (4xx) and failures (5xx). */
export const ERRORS = { '4xx': ERROR_SCHEMA, '5xx': ERROR_SCHEMA } as const;

/** A query string with only these parameters (another one is a 400 naming it). */
export function query(properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema {
  return { type: 'object', additionalProperties: false, properties, ...(required.length > 0 ? { required } : {}) };
}

export const TIME_PARAM = { type: 'string', maxLength: 64, description: 'RFC 3339 (`2026-11-29T18:00:00Z`) or Unix seconds (or milliseconds)' } as const;
export const FROM = { ...TIME_PARAM, description: `Start of the range (inclusive). ${TIME_PARAM.description}` } as const;
export const TO = { ...TIME_PARAM, description: `End of the range (exclusive); default now. ${TIME_PARAM.description}` } as const;
export const NAME_PARAM = { type: 'string', maxLength: 256 } as const;
export const TEAM_PARAM = { type: 'string', maxLength: 256, description: 'A team; a team key may only name its own' } as const;
export const ISO_TIME = { type: 'string', description: 'RFC 3339' } as const;
export const NULLABLE_STRING = { type: ['string', 'null'] } as const;
