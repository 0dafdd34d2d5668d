import { test } from 'node:test';
import assert from 'node:assert/strict';
import { redactUrlCredentials } from '@sightline/core';

test('userinfo is removed from every URL in a text, lists and error messages included', () => {
  assert.equal(redactUrlCredentials('nats://alice:s3cret@10.0.0.1:4222'), 'nats://***@10.0.0.1:4222');
  assert.equal(redactUrlCredentials('nats://tok3n@a:4222, nats://bob:pw@b:4222,nats://c:4222'), 'nats://***@a:4222, nats://***@b:4222,nats://c:4222');
  assert.equal(redactUrlCredentials('connect ECONNREFUSED for http://default:p%40ss@127.0.0.1:8123/?database=x'), 'connect ECONNREFUSED for http://***@127.0.0.1:8123/?database=x');
  assert.equal(redactUrlCredentials('http://127.0.0.1:8123 and mail me@example.com'), 'http://127.0.0.1:8123 and mail me@example.com');
});
