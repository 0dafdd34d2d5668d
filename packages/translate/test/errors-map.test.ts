import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  MAX_ERROR_MESSAGE_LENGTH,
  TranslationError,
  anthropicErrorToOpenAI,
  isTranslationError,
  openaiErrorToAnthropic,
  scrubSecrets,
  translationErrorToAnthropic,
  translationErrorToOpenAI,
} from '../src/index.js';

function json(body: string): unknown {
  return JSON.parse(body) as unknown;
}

describe('openaiErrorToAnthropic', () => {
  test('status table', () => {
    const table: Array<[number, string]> = [
      [400, 'invalid_request_error'],
      [401, 'authentication_error'],
      [403, 'permission_error'],
      [404, 'not_found_error'],
      [413, 'request_too_large'],
      [422, 'invalid_request_error'],
      [429, 'rate_limit_error'],
      [500, 'api_error'],
      [502, 'api_error'],
      [503, 'overloaded_error'],
      [529, 'overloaded_error'],
    ];
    for (const [status, type] of table) {
      const out = openaiErrorToAnthropic(status, { error: { message: 'm', type: 'whatever', param: null, code: null } });
      assert.equal(out.status, status, 'status preserved');
      assert.deepEqual(json(out.body), { type: 'error', error: { type, message: 'm' } }, String(status));
    }
  });

  test('falls back to the OpenAI type for statuses outside the table', () => {
    const body = (type: string): unknown => ({ error: { message: 'm', type, param: null, code: null } });
    assert.equal((json(openaiErrorToAnthropic(402, body('insufficient_quota')).body) as { error: { type: string } }).error.type, 'rate_limit_error');
    assert.equal((json(openaiErrorToAnthropic(409, body('not_found_error')).body) as { error: { type: string } }).error.type, 'not_found_error');
    assert.equal((json(openaiErrorToAnthropic(418, body('teapot')).body) as { error: { type: string } }).error.type, 'invalid_request_error');
  });

  test('param is prefixed to the message; string and byte bodies are parsed', () => {
    const body = JSON.stringify({ error: { message: "'messages' is required", type: 'invalid_request_error', param: 'messages', code: null } });
    assert.deepEqual(json(openaiErrorToAnthropic(400, body).body), { type: 'error', error: { type: 'invalid_request_error', message: "messages: 'messages' is required" } });
    assert.deepEqual(json(openaiErrorToAnthropic(400, Buffer.from(body)).body), { type: 'error', error: { type: 'invalid_request_error', message: "messages: 'messages' is required" } });
  });

  test('non-standard bodies: {error: string}, {detail}, plain text, nothing', () => {
    const msg = (status: number, body: unknown): string => (json(openaiErrorToAnthropic(status, body).body) as { error: { message: string } }).error.message;
    assert.equal(msg(400, { error: 'bad thing' }), 'bad thing');
    assert.equal(msg(422, { detail: 'field required' }), 'field required');
    assert.equal(msg(502, '<html>Bad Gateway</html>'), '<html>Bad Gateway</html>');
    assert.equal(msg(500, undefined), 'upstream error (HTTP 500)');
    assert.equal(msg(500, ''), 'upstream error (HTTP 500)');
    assert.equal(msg(500, 42), 'upstream error (HTTP 500)');
    assert.equal(msg(500, 'x'.repeat(5000)).length, MAX_ERROR_MESSAGE_LENGTH + 1);
  });
});

describe('anthropicErrorToOpenAI', () => {
  test('type table (the Anthropic type decides)', () => {
    const table: Array<[number, string, string, string | null]> = [
      [400, 'invalid_request_error', 'invalid_request_error', null],
      [401, 'authentication_error', 'authentication_error', null],
      [403, 'permission_error', 'permission_error', null],
      [404, 'not_found_error', 'not_found_error', null],
      [413, 'request_too_large', 'invalid_request_error', 'request_too_large'],
      [429, 'rate_limit_error', 'rate_limit_error', null],
      [500, 'api_error', 'server_error', null],
      [529, 'overloaded_error', 'server_error', 'overloaded_error'],
    ];
    for (const [status, aType, oType, code] of table) {
      const out = anthropicErrorToOpenAI(status, { type: 'error', error: { type: aType, message: 'm' }, request_id: 'req_1' });
      assert.equal(out.status, status);
      assert.deepEqual(json(out.body), { error: { message: 'm', type: oType, param: null, code } }, aType);
    }
  });

  test('unknown type falls back to the status', () => {
    const type = (status: number): string =>
      (json(anthropicErrorToOpenAI(status, { type: 'error', error: { type: 'billing_error', message: 'm' } }).body) as { error: { type: string } }).error.type;
    assert.equal(type(401), 'authentication_error');
    assert.equal(type(402), 'invalid_request_error');
    assert.equal(type(429), 'rate_limit_error');
    assert.equal(type(504), 'server_error');
  });
});

describe('secret scrubbing', () => {
  const secrets = [
    'sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCd',
    'sk-proj-abcdefghijklmnopqrstuvwx',
    'sk-1234567890abcdef',
    'sk-proj-********************abcd',
    'AKIAIOSFODNN7EXAMPLE',
    'AIzaSyA-1234567890abcdefghijklmnopqrstu',
    'ghp_abcdefghijklmnopqrstuvwxyz0123456789',
    'xoxb-1234567890-abcdefghij',
    'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
  ];

  test('scrubSecrets removes every credential shape', () => {
    for (const s of secrets) {
      const out = scrubSecrets(`Incorrect API key provided: ${s}. You can find your API key at https://x.`);
      assert.equal(out.includes(s), false, s);
      assert.match(out, /\[redacted\]/);
      assert.match(out, /^Incorrect API key provided: /);
    }
    assert.equal(scrubSecrets('Authorization: Bearer abc.def-ghi_123456'), 'Authorization: [redacted]');
    assert.equal(scrubSecrets('{"x-api-key": "abcdef123456"}'), '{"x-api-key": "[redacted]"}');
    assert.equal(scrubSecrets('api_key=hunter2hunter2'), 'api_key=[redacted]');
  });

  test('ordinary text is untouched', () => {
    const s = 'messages.0.content: Input should be a valid list; task-force sk- short sk-abc';
    assert.equal(scrubSecrets(s), s);
  });

  test('no key survives either mapping, in message or param', () => {
    for (const s of secrets) {
      const o = openaiErrorToAnthropic(401, { error: { message: `bad key ${s}`, type: 'invalid_request_error', param: s, code: 'invalid_api_key' } });
      assert.equal(o.body.includes(s), false, s);
      const a = anthropicErrorToOpenAI(401, JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: `invalid x-api-key ${s}` } }));
      assert.equal(a.body.includes(s), false, s);
      const t = openaiErrorToAnthropic(500, `upstream said: ${s}`);
      assert.equal(t.body.includes(s), false, s);
    }
  });
});

describe('TranslationError', () => {
  test('carries code and param; maps to 400 in both dialects', () => {
    const err = new TranslationError('unsupported_parameter', 'n other than 1 has no equivalent', 'n');
    assert.ok(err instanceof Error);
    assert.ok(isTranslationError(err));
    assert.equal(isTranslationError(new Error('x')), false);
    const o = translationErrorToOpenAI(err);
    assert.equal(o.status, 400);
    assert.deepEqual(json(o.body), { error: { message: 'n other than 1 has no equivalent', type: 'invalid_request_error', param: 'n', code: 'unsupported_parameter' } });
    const a = translationErrorToAnthropic(err);
    assert.equal(a.status, 400);
    assert.deepEqual(json(a.body), { type: 'error', error: { type: 'invalid_request_error', message: 'n: n other than 1 has no equivalent' } });
    const noParam = translationErrorToAnthropic(new TranslationError('invalid_request', 'request body must be a JSON object'));
    assert.deepEqual(json(noParam.body), { type: 'error', error: { type: 'invalid_request_error', message: 'request body must be a JSON object' } });
  });
});
