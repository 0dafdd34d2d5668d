/**
 * The redaction corpus: what must go and what must stay (issue 11, item 4).
 *
 * Keys and tokens are generated from a fixed seed rather than written out, so that the file
 * holds no string a secret scanner would flag (GitHub push protection, gitleaks) while every
 * token still has its provider's exact shape. Personal data uses reserved or documented test
 * values: example.org/.com addresses, 555/Ofcom drama phone ranges, the card schemes' test
 * numbers, the IBAN registry's examples, RFC 5737/3849 documentation addresses.
 */

import type { RedactionPolicy, RedactionType } from '../src/index.ts';
import { seeded as mulberry32 } from '../../../test/support/seeded.js';

// ---------------------------------------------------------------------------------------
// Deterministic fake material.

const random = mulberry32(0x5eed);
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const B64URL = ALNUM + '-_';
const UPPER32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
const HEX = '0123456789abcdef';

/** `n` characters from `alphabet`; always contains a digit when the alphabet has digits. */
export function fake(n: number, alphabet = ALNUM): string {
  for (;;) {
    let s = '';
    for (let i = 0; i < n; i++) s += alphabet[Math.floor(random() * alphabet.length)];
    if (!/[0-9]/.test(alphabet) || /[0-9]/.test(s)) return s;
  }
}

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const b64url = (s: string): string => Buffer.from(s).toString('base64url');

// Prefixes are joined at run time for the same reason as above.
const j = (...parts: string[]): string => parts.join('');

export const KEYS = {
  openaiLegacy: j('sk-', fake(20), 'T3Blbk', 'FJ', fake(20)),
  openaiProject: j('sk-', 'proj-', fake(74, B64URL), 'T3Blbk', 'FJ', fake(74, B64URL)),
  openaiService: j('sk-', 'svcacct-', fake(74, B64URL), 'T3Blbk', 'FJ', fake(40, B64URL)),
  anthropic: j('sk-', 'ant-', 'api03-', fake(93, B64URL), 'AA'),
  sightline: j('sl-', fake(43, B64URL)),
  google: j('AI', 'za', 'Sy', fake(33, B64URL)),
  awsId: j('AK', 'IA', fake(16, UPPER32)),
  awsSession: j('AS', 'IA', fake(16, UPPER32)),
  awsSecret: fake(40, ALNUM + '/+'),
  githubClassic: j('gh', 'p_', fake(36)),
  githubOauth: j('gh', 'o_', fake(36)),
  githubServer: j('gh', 's_', fake(36)),
  githubFine: j('github', '_pat_', fake(22), '_', fake(59)),
  gitlab: j('gl', 'pat-', fake(20, B64URL)),
  slackBot: j('xo', 'xb-', fake(12, '0123456789'), '-', fake(13, '0123456789'), '-', fake(24)),
  slackUser: j('xo', 'xp-', fake(12, '0123456789'), '-', fake(12, '0123456789'), '-', fake(13, '0123456789'), '-', fake(32, HEX)),
  slackWebhook: j('https://hooks.', 'slack.com/services/T', fake(8, UPPER32), '/B', fake(8, UPPER32), '/', fake(24)),
  stripeLive: j('sk', '_live_', fake(99)),
  stripeRestricted: j('rk', '_live_', fake(99)),
  huggingface: j('hf', '_', fake(34)),
  groq: j('gs', 'k_', fake(52)),
  xai: j('xa', 'i-', fake(80)),
  openrouter: j('sk-', 'or-', 'v1-', fake(64, HEX)),
  mistral: fake(32),
  jwt: j(b64url('{"alg":"HS256","typ":"JWT"}'), '.', b64url(`{"sub":"1234567890","name":"John Doe","iat":1516239022}`), '.', fake(43, B64URL)),
  basicCredential: b64('alice:s3cr3t-Passw0rd'),
} as const;

const PEM_BODY = Array.from({ length: 6 }, () => fake(64, ALNUM + '+/')).join('\n');
export const PEM_RSA = `-----BEGIN RSA PRIVATE KEY-----\n${PEM_BODY}\n-----END RSA PRIVATE KEY-----`;
export const PEM_PKCS8 = `-----BEGIN PRIVATE KEY-----\n${PEM_BODY}\n-----END PRIVATE KEY-----\n`;
export const PEM_OPENSSH = `-----BEGIN OPENSSH PRIVATE KEY-----\n${PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----`;

// ---------------------------------------------------------------------------------------
// The corpus.

export interface MustGo {
  name: string;
  /** The counts key it must be counted under. */
  type: RedactionType;
  text: string;
  /** Substrings that must not survive redaction. */
  secrets: string[];
  /** Also checked URL-encoded (query strings, form bodies). */
  urlEncoded?: boolean;
}

export interface MustStay {
  name: string;
  text: string;
}

/** The policy that first removes a type: secrets under `full`, personal data under `redacted`. */
export function policyFor(type: RedactionType): RedactionPolicy {
  return ['email', 'phone', 'card', 'iban', 'ip', 'ssn'].includes(type) ? 'redacted' : 'full';
}

export const MUST_GO: MustGo[] = [
  // Provider keys and tokens.
  { name: 'OpenAI legacy key in prose', type: 'secret:openai', text: `My key is ${KEYS.openaiLegacy}, why does it return 401?`, secrets: [KEYS.openaiLegacy] },
  { name: 'OpenAI project key in an env file', type: 'secret:openai', text: `OPENAI_API_KEY=${KEYS.openaiProject}\nOPENAI_ORG=org-abc`, secrets: [KEYS.openaiProject], urlEncoded: true },
  { name: 'OpenAI service account key in code', type: 'secret:openai', text: `client = OpenAI(api_key="${KEYS.openaiService}")`, secrets: [KEYS.openaiService] },
  { name: 'Anthropic key in a curl command', type: 'secret:anthropic', text: `curl https://api.anthropic.com/v1/messages -H "x-api-key: ${KEYS.anthropic}" -H "anthropic-version: 2023-06-01"`, secrets: [KEYS.anthropic] },
  { name: 'Sightline key as a bearer token', type: 'secret:sightline', text: `export OPENAI_BASE_URL=http://gateway:8080/v1\nexport OPENAI_API_KEY=${KEYS.sightline}`, secrets: [KEYS.sightline], urlEncoded: true },
  { name: 'Sightline key in a JSON config', type: 'secret:sightline', text: `{"gateway": "http://localhost:8080", "key": "${KEYS.sightline}"}`, secrets: [KEYS.sightline] },
  { name: 'Google API key in a URL', type: 'secret:google', text: `GET https://generativelanguage.googleapis.com/v1beta/models?key=${KEYS.google}`, secrets: [KEYS.google], urlEncoded: true },
  { name: 'AWS access key id and secret in a credentials file', type: 'secret:aws', text: `[default]\naws_access_key_id = ${KEYS.awsId}\naws_secret_access_key = ${KEYS.awsSecret}\nregion = eu-west-1`, secrets: [KEYS.awsId, KEYS.awsSecret] },
  { name: 'AWS session key id in prose', type: 'secret:aws', text: `The temporary credentials start with ${KEYS.awsSession} and expire in an hour.`, secrets: [KEYS.awsSession] },
  { name: 'AWS secret in an env export', type: 'secret:aws', text: `export AWS_SECRET_ACCESS_KEY="${KEYS.awsSecret}"`, secrets: [KEYS.awsSecret] },
  { name: 'GitHub classic token in a git remote', type: 'secret:github', text: `git remote set-url origin https://x-access-token:${KEYS.githubClassic}@github.com/acme/app.git`, secrets: [KEYS.githubClassic] },
  { name: 'GitHub OAuth and server tokens', type: 'secret:github', text: `oauth=${KEYS.githubOauth} server=${KEYS.githubServer}`, secrets: [KEYS.githubOauth, KEYS.githubServer] },
  { name: 'GitHub fine-grained token in YAML', type: 'secret:github', text: `env:\n  GITHUB_TOKEN: ${KEYS.githubFine}\n`, secrets: [KEYS.githubFine] },
  { name: 'GitLab token', type: 'secret:gitlab', text: `PRIVATE-TOKEN: ${KEYS.gitlab}`, secrets: [KEYS.gitlab] },
  { name: 'Slack bot and user tokens', type: 'secret:slack', text: `SLACK_BOT_TOKEN=${KEYS.slackBot}\nSLACK_USER_TOKEN=${KEYS.slackUser}`, secrets: [KEYS.slackBot, KEYS.slackUser] },
  { name: 'Slack webhook URL', type: 'secret:slack', text: `Post the alert to ${KEYS.slackWebhook} when the job fails.`, secrets: [KEYS.slackWebhook.slice(KEYS.slackWebhook.indexOf('/services/') + 10)] },
  { name: 'Stripe live secret and restricted keys', type: 'secret:stripe', text: `stripe.api_key = "${KEYS.stripeLive}"  # restricted: ${KEYS.stripeRestricted}`, secrets: [KEYS.stripeLive, KEYS.stripeRestricted] },
  { name: 'Hugging Face token', type: 'secret:huggingface', text: `huggingface-cli login --token ${KEYS.huggingface}`, secrets: [KEYS.huggingface] },
  { name: 'Groq key', type: 'secret:groq', text: `GROQ_API_KEY=${KEYS.groq}`, secrets: [KEYS.groq] },
  { name: 'xAI key', type: 'secret:xai', text: `Use ${KEYS.xai} for grok.`, secrets: [KEYS.xai] },
  { name: 'OpenRouter key', type: 'secret:openrouter', text: `Authorization: Bearer ${KEYS.openrouter}`, secrets: [KEYS.openrouter] },
  // Context: bearer and basic credentials, labelled values.
  { name: 'opaque bearer token in a header', type: 'secret', text: `curl -H "Authorization: Bearer ${KEYS.mistral}" https://api.mistral.ai/v1/models`, secrets: [KEYS.mistral] },
  { name: 'basic credential in a header', type: 'secret', text: `Authorization: Basic ${KEYS.basicCredential}`, secrets: [KEYS.basicCredential] },
  { name: 'labelled API key without a known prefix', type: 'secret', text: `MISTRAL_API_KEY=${KEYS.mistral}`, secrets: [KEYS.mistral], urlEncoded: true },
  { name: 'JWT in prose', type: 'jwt', text: `Decode this token: ${KEYS.jwt}`, secrets: [KEYS.jwt, KEYS.jwt.split('.')[2] ?? ''] },
  { name: 'JWT as a bearer token', type: 'jwt', text: `Authorization: Bearer ${KEYS.jwt}`, secrets: [KEYS.jwt] },
  { name: 'JWT in a query string', type: 'jwt', text: `https://app.example.com/callback?id_token=${KEYS.jwt}&state=xyz`, secrets: [KEYS.jwt] },
  { name: 'RSA private key in a code block', type: 'private_key', text: `Why does this fail?\n\n\`\`\`\n${PEM_RSA}\n\`\`\`\n`, secrets: [PEM_BODY.slice(0, 64), PEM_BODY.slice(-64)] },
  { name: 'PKCS#8 key in a service account file', type: 'private_key', text: JSON.stringify({ type: 'service_account', project_id: 'demo', private_key: PEM_PKCS8, client_email: 'svc@demo.iam.gserviceaccount.com' }), secrets: [PEM_BODY.slice(0, 64)] },
  { name: 'OpenSSH key cut short (no END line)', type: 'private_key', text: `${PEM_OPENSSH.slice(0, 200)}`, secrets: [PEM_BODY.slice(0, 64)] },
  // Passwords.
  { name: 'password in a database URL', type: 'password', text: 'DATABASE_URL=postgres://app:Sup3r-S3cret@db.internal:5432/prod?sslmode=require', secrets: ['Sup3r-S3cret'] },
  { name: 'password in a redis URL without a user', type: 'password', text: 'connect to redis://:p4ssw0rd!@cache.internal:6379/0', secrets: ['p4ssw0rd!'] },
  { name: 'password in a query string', type: 'password', text: 'POST /login?user=bob&password=hunter2&remember=1', secrets: ['hunter2'], urlEncoded: true },
  { name: 'password in JSON text', type: 'password', text: '{"username": "bob", "password": "correct horse battery staple"}', secrets: ['correct horse battery staple'] },
  { name: 'password in an env file', type: 'password', text: 'POSTGRES_USER=app\nPOSTGRES_PASSWORD=Tr0ub4dor&3\n', secrets: ['Tr0ub4dor'] },
  { name: 'password in YAML', type: 'password', text: 'database:\n  user: app\n  password: "s3cr3t: with colon"\n', secrets: ['s3cr3t: with colon'] },
  { name: 'password as a keyword argument', type: 'password', text: 'conn = psycopg.connect(host="db", user="app", password="p@ssw0rd-2024")', secrets: ['p@ssw0rd-2024'] },
  { name: 'camelCase password field in JS', type: 'password', text: "const config = { dbUser: 'app', dbPassword: 'Pa55word!' };", secrets: ['Pa55word!'] },
  // Personal data.
  { name: 'e-mail in prose', type: 'email', text: 'Please reply to maria.gonzalez@example.org before Friday.', secrets: ['maria.gonzalez@example.org', 'maria.gonzalez'] },
  { name: 'e-mail with a tag and a subdomain', type: 'email', text: 'Contact: <john.doe+billing@mail.example.co.uk>', secrets: ['john.doe+billing', 'mail.example.co.uk'] },
  { name: 'e-mail in a mailto link', type: 'email', text: '<a href="mailto:support@example.com">write to us</a>', secrets: ['support@example.com'] },
  { name: 'e-mail URL-encoded in a query string', type: 'email', text: 'GET /unsubscribe?email=jane.roe%40example.net&list=news', secrets: ['jane.roe%40example.net', 'jane.roe'] },
  { name: 'e-mail in JSON', type: 'email', text: '{"customer": {"name": "Jane Roe", "email": "jane_roe@example.com"}}', secrets: ['jane_roe@example.com'] },
  { name: 'international phone with spaces', type: 'phone', text: 'Call me on +44 20 7946 0958 after six.', secrets: ['7946 0958', '+44 20 7946 0958'] },
  { name: 'international phone in E.164', type: 'phone', text: '{"to": "+14155552671", "body": "Your code is ready"}', secrets: ['14155552671'], urlEncoded: true },
  { name: 'international phone with a trunk in parentheses', type: 'phone', text: 'Tel. +49 (0)30 12345678', secrets: ['(0)30 12345678'] },
  { name: 'French mobile in pairs', type: 'phone', text: 'Mon portable : +33 6 12 34 56 78', secrets: ['12 34 56 78'] },
  { name: 'US phone with an area code in parentheses', type: 'phone', text: 'Our office: (415) 555-2671, Monday to Friday.', secrets: ['555-2671', '(415) 555'] },
  { name: 'US phone with dashes and a country code', type: 'phone', text: 'Dial 1-800-555-0199 for support.', secrets: ['800-555-0199'] },
  { name: 'US phone with dots', type: 'phone', text: 'text 415.555.2671 when you arrive', secrets: ['415.555.2671'] },
  { name: 'UK national phone', type: 'phone', text: 'Ring 020 7946 0958 or 07700 900123.', secrets: ['7946 0958', '900123'] },
  { name: 'German national phone', type: 'phone', text: 'Telefon: 030 12345678', secrets: ['030 12345678'] },
  { name: 'French national phone', type: 'phone', text: 'Appelez le 01 23 45 67 89 demain.', secrets: ['23 45 67 89'] },
  { name: 'Visa test card with spaces', type: 'card', text: 'Card: 4111 1111 1111 1111, exp 12/27, CVC 123', secrets: ['4111 1111 1111 1111'] },
  { name: 'Mastercard test card unbroken', type: 'card', text: '{"card_number": "5555555555554444"}', secrets: ['5555555555554444'] },
  { name: 'Amex test card 4-6-5', type: 'card', text: 'Amex 3782 822463 10005 was declined', secrets: ['822463'] },
  { name: 'Discover test card with dashes', type: 'card', text: 'use 6011-1111-1111-1117 instead', secrets: ['6011-1111-1111-1117'] },
  { name: 'card followed by another number', type: 'card', text: 'paid with 4111 1111 1111 1111 2024 receipt', secrets: ['4111 1111 1111 1111'] },
  { name: 'German IBAN in groups', type: 'iban', text: 'IBAN: DE89 3704 0044 0532 0130 00, BIC COBADEFFXXX', secrets: ['DE89 3704 0044 0532 0130 00', '0130 00'] },
  { name: 'British IBAN unbroken', type: 'iban', text: 'Pay to GB82WEST12345698765432 by Monday.', secrets: ['GB82WEST12345698765432'] },
  { name: 'French IBAN with letters in the account', type: 'iban', text: 'RIB : FR14 2004 1010 0505 0001 3M02 606', secrets: ['2004 1010 0505 0001 3M02 606'] },
  { name: 'IPv4 in a log line', type: 'ip', text: '2024-03-14T10:30:00Z GET /login 401 client=203.0.113.7 ua=curl/8.5.0', secrets: ['203.0.113.7'] },
  { name: 'private IPv4 with a port', type: 'ip', text: 'ssh into 192.168.1.20:22 then run the script', secrets: ['192.168.1.20'] },
  { name: 'IPv6 compressed', type: 'ip', text: 'The server listens on 2001:db8::8a2e:370:7334 now.', secrets: ['2001:db8::8a2e:370:7334'] },
  { name: 'IPv6 full form', type: 'ip', text: 'addr 2001:0db8:85a3:0000:0000:8a2e:0370:7334 assigned', secrets: ['85a3:0000:0000:8a2e'] },
  { name: 'IPv6 in brackets with a port', type: 'ip', text: 'curl http://[2001:db8::1]:8080/health', secrets: ['2001:db8::1'] },
  { name: 'IPv6 link-local', type: 'ip', text: 'neighbour fe80::1ff:fe23:4567:890a reachable', secrets: ['fe80::1ff:fe23:4567:890a'] },
  { name: 'IPv6 after a label', type: 'ip', text: 'client ip:2001:db8::42 port:443', secrets: ['2001:db8::42'] },
  { name: 'US SSN', type: 'ssn', text: 'SSN: 219-09-9999 (on file)', secrets: ['219-09-9999'] },
  { name: 'US SSN in JSON', type: 'ssn', text: '{"ssn": "078-05-1120"}', secrets: ['078-05-1120'] },
];

// A 1 KiB base64 payload (a PNG header and random bytes), as images arrive in chat requests.
const IMAGE_BASE64 = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.from(Array.from({ length: 760 }, () => Math.floor(random() * 256)))]).toString('base64');

export const MUST_STAY: MustStay[] = [
  { name: 'UUIDs', text: 'request 550e8400-e29b-41d4-a716-446655440000 and trace 123e4567-e89b-12d3-a456-426614174000' },
  { name: 'hashes and git SHAs', text: 'sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, commit 9f2c1e7a4b3d8e6f0a1b2c3d4e5f6a7b8c9d0e1f (9f2c1e7)' },
  { name: 'version numbers', text: 'Python 3.11.4, node v20.19.0, version 1.0.0.1, Chrome/120.0.6099.109, OID 1.3.6.1.4.1.343' },
  { name: 'dates and times', text: '2024-03-14, 14.03.2024, 03/14/2024, 2024-03-14T10:30:45.123Z, 10:30:45, 1990-2024' },
  { name: 'prices and amounts', text: 'It costs $1,299.99 (€ 1.234,56), or 1 234 567 EUR in total; 12,345,678 units.' },
  { name: 'token counts and timestamps', text: 'The model used 128000 tokens (1,284 output) at 1717171717 (1717171717123 ms).' },
  { name: 'order and ticket numbers', text: 'Order ORD-2024-00123, invoice #100045, incidents INC-20417 and INC-20433.' },
  { name: 'non-Luhn 16-digit numbers', text: 'Reference 4111 1111 1111 1112 and 1234567890123456 and 5555-5555-5555-4445.' },
  { name: 'long ids', text: 'snowflake 1234567890123456789, shipment 1Z999AA10123456784' },
  { name: 'ISBN', text: 'ISBN 978-3-16-148410-0' },
  { name: 'invalid SSN ranges', text: '000-12-3456, 666-12-3456, 900-12-3456, 123-00-4567, 123-45-0000' },
  { name: 'IBAN with a wrong check', text: 'DE89 3704 0044 0532 0130 01 and ISO8601' },
  { name: 'not IPv4', text: '999.1.1.1, 1.2.3, 10.0.0.0.1, and the loopback 127.0.0.1 or 0.0.0.0:8080' },
  { name: 'MAC address and times with colons', text: 'MAC 00:1A:2B:3C:4D:5E at 12:30:45, ratio 16:9' },
  { name: 'C++ and Rust paths', text: 'std::vector<int> v; let x = Vec::new(); impl Add::add for Point; ::1 is loopback' },
  { name: 'sk- in words', text: 'Use scikit-learn (sk-learn) and the sk-learn-compatible-transformer; assess risk-assessment-matrix.' },
  { name: 'bearer and password in prose', text: 'Send the Bearer token in the Authorization header. Choose a strong password and never share it. Forgot password?' },
  { name: 'password in code that is not a literal', text: 'password = getpass.getpass()\nif not password:\n    password: str = None\nuser.password_hash = hash(password)\nlogin(password=password_input)' },
  { name: 'password placeholders', text: 'password=${DB_PASSWORD}\npassword: {{ vault_password }}\n"password": "********"' },
  { name: 'JSON schema with a password property', text: '{"name": "login", "parameters": {"type": "object", "properties": {"password": {"type": "string"}}, "required": ["password"]}}' },
  { name: 'max_tokens and logprobs', text: '{"max_tokens": 1024, "logprobs": [{"token": "Hello", "logprob": -0.01}]}' },
  { name: 'placeholder API key', text: 'OPENAI_API_KEY=your-api-key-here' },
  { name: 'API ids that look like keys', text: 'chatcmpl-9abcDEF123456789xyzABC, msg_01XyZabc123DEF456ghi, toolu_01A09q90qw90lq917835lq9, call_abc123' },
  { name: 'at-signs that are not e-mail', text: 'npm i @types/node@20.11.5; logo@2x.png; @mention; git@github.com:acme/app.git; user@localhost' },
  { name: 'URL with a user but no password', text: 'ssh://deploy@host.example.com/srv and https://example.com:8443/path' },
  { name: 'numbers in math and lists', text: '2 + 2 = 4, +5 points, 3.14159, 1e-9, 0x7fffffff, (1) (2) (3), call 911' },
  { name: 'base64 image data URL', text: `![chart](data:image/png;base64,${IMAGE_BASE64})` },
  { name: 'raw base64 image', text: IMAGE_BASE64 },
  { name: 'coordinates and hex colours', text: 'Paris is at 48.8566, 2.3522; use #ff0000 for errors.' },
];
