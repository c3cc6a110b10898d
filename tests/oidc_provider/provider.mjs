// A real OpenID Connect provider for the tests: panva/oidc-provider 8.x on plain http, loopback only.
//
// Usage: node provider.mjs '<JSON>'        (one argument: the configuration, as JSON)
//
//   {
//     "port": 0,                            // 0: the system picks a free port (the READY line says which)
//     "issuer": "http://127.0.0.1:PORT",    // optional; default http://127.0.0.1:<the port listened on>
//     "clients": [{
//       "client_id": "uma-server",
//       "client_secret": "...",
//       "redirect_uris": ["http://127.0.0.1:8080/rqp_claims/callback"],
//       "token_endpoint_auth_method": "client_secret_basic"     // or "client_secret_post"
//     }],
//     "accounts": [{
//       "sub": "alice-sub", "login": "alice", "password": "...",
//       "claims": {"email": "alice@example.org", "email_verified": true, "name": "Alice", "role": "doctor"}
//     }],
//     "scopes": {"employee": ["role"]},     // optional: more scopes (scope -> claim names), merged over
//                                           //   openid [sub], email [email email_verified], profile [...]
//     "admin_token": "...",                 // optional: turns on POST /test-admin/redirect-uris (below)
//     "features": {"clientCredentials": true, "introspection": true},   // optional: more features
//                                           //   of oidc-provider turned on (bench/run.py's peer)
//     "ttl": {"ClientCredentials": 3600},   // optional: lifetimes (seconds) merged over the defaults
//     "log_requests": false                 // optional (default true): the stderr line per request
//   }
//
// What it does:
// - authorization code flow only, PKCE (S256) required of every client, `nonce` carried into the ID
//   token; scopes openid, email, profile (and those of "scopes"); the ID token carries the claims of
//   the granted scopes too (conformIdTokenClaims off), and the UserInfo endpoint answers as well;
//   every account claim not in a scope can still be asked for with the `claims` parameter;
// - discovery at /.well-known/openid-configuration, an RS256 key generated at start (served at the
//   jwks_uri, /jwks);
// - its own minimal interactions instead of oidc-provider's development ones: GET /interaction/<uid>
//   shows a login form (<form id="login-form">, inputs id/name "login" and "password", a submit
//   button id/name "submit"), POSTed to /interaction/<uid>/login; a wrong login or password shows
//   the form again with <p id="error">. Consent is granted at once (a GET of the interaction in the
//   consent prompt redirects back), so a browser only fills in the login form.
//
// - a client must authenticate at the token endpoint with the method it was registered with
//   (oidc-provider itself takes client_secret_basic and client_secret_post for one another);
// - with "admin_token": POST /test-admin/redirect-uris, `Authorization: Bearer <admin_token>`, a JSON
//   body {"client_id": "...", "redirect_uri": "..."}, allows one more redirect URI (an exact match) for
//   that client from then on: for a server under test whose port is known only after the provider's
//   issuer is (it answers 204; 401 for a wrong token, 404 for an unknown client).
//
// Prints `READY http://127.0.0.1:PORT` on stdout once listening; a line on stderr per request (unless
// "log_requests" is false); exits with status 0 on SIGTERM or SIGINT. Everything is held in memory
// and lost at exit.

import { generateKeyPairSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const STANDARD_SCOPES = {
  openid: ['sub'],
  email: ['email', 'email_verified'],
  profile: [
    'name', 'family_name', 'given_name', 'middle_name', 'nickname', 'preferred_username',
    'profile', 'picture', 'website', 'gender', 'birthdate', 'zoneinfo', 'locale', 'updated_at',
  ],
};

function fail(message) {
  process.stderr.write(`provider.mjs: ${message}\n`);
  process.exit(2);
}

function readConfig() {
  if (process.argv.length !== 3) fail("usage: node provider.mjs '<JSON configuration>'");
  let config;
  try {
    config = JSON.parse(process.argv[2]);
  } catch (err) {
    fail(`the configuration is not JSON: ${err.message}`);
  }
  if (!Number.isInteger(config.port) || config.port < 0) fail('"port" must be an integer >= 0');
  if (!Array.isArray(config.clients) || config.clients.length === 0) fail('"clients" must be a non-empty list');
  if (!Array.isArray(config.accounts) || config.accounts.length === 0) fail('"accounts" must be a non-empty list');
  for (const account of config.accounts) {
    for (const key of ['sub', 'login', 'password']) {
      if (typeof account[key] !== 'string' || !account[key]) fail(`every account needs a "${key}" string`);
    }
  }
  return config;
}

function signingKeys() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { keys: [{ ...jwk, kid: randomBytes(8).toString('hex'), alg: 'RS256', use: 'sig' }] };
}

function sameText(a, b) {
  const left = Buffer.from(String(a), 'utf8');
  const right = Buffer.from(String(b), 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

async function readBody(req, limit = 64 * 1024) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > limit) throw Object.assign(new Error('form too large'), { status: 413 });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function loginPage(uid, clientId, error) {
  const message = error ? `<p id="error">${escapeHtml(error)}</p>` : '';
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Sign in to the test OpenID provider</title></head>
<body>
<h1>Sign in</h1>
<p>to continue to <span id="client">${escapeHtml(clientId)}</span></p>
${message}
<form id="login-form" method="post" action="/interaction/${escapeHtml(uid)}/login" autocomplete="off">
<label for="login">Login</label> <input id="login" name="login" type="text" autofocus required>
<label for="password">Password</label> <input id="password" name="password" type="password" required>
<button id="submit" name="submit" type="submit">Sign in</button>
</form>
</body>
</html>
`;
}

const config = readConfig();
const accounts = config.accounts;
const accountsBySub = new Map(accounts.map((account) => [account.sub, account]));

const scopes = { ...STANDARD_SCOPES, ...(config.scopes ?? {}) };
const claims = { ...scopes };
const inScopes = new Set(Object.values(scopes).flat());
for (const account of accounts) {
  for (const name of Object.keys(account.claims ?? {})) {
    if (!inScopes.has(name) && !(name in claims)) claims[name] = null; // by the claims parameter only
  }
}

const clients = config.clients.map((client) => ({
  grant_types: ['authorization_code'],
  response_types: ['code'],
  token_endpoint_auth_method: 'client_secret_basic',
  ...client,
}));

// Listen first, so that port 0 works: the issuer is only known once the port is.
const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(config.port, '127.0.0.1', resolve);
});
const { port } = server.address();
const issuer = config.issuer ?? `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients,
  jwks: signingKeys(),
  claims,
  scopes: Object.keys(scopes),
  responseTypes: ['code'],
  pkce: { methods: ['S256'], required: () => true },
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: false },
    userinfo: { enabled: true },
    claimsParameter: { enabled: true },
    ...Object.fromEntries(Object.entries(config.features ?? {}).map(([name, on]) => [name, { enabled: !!on }])),
  },
  // Plain http: the long-lived cookies (the session) default to SameSite=None, which Chromium drops
  // without Secure (https); only the copy oidc-provider sets beside it, "<name>.legacy" without
  // SameSite, would then carry the session. Lax works on http, one cookie each, and is all a
  // top-level redirect flow needs. (Cookies are never Secure here: the connection is not.)
  cookies: {
    keys: [randomBytes(32).toString('hex')],
    long: { httpOnly: true, sameSite: 'lax', signed: true },
    short: { httpOnly: true, sameSite: 'lax', signed: true },
  },
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 600,
    ClientCredentials: 600,
    Grant: 86400,
    IdToken: 3600,
    Interaction: 3600,
    Session: 86400,
    ...(config.ttl ?? {}),
  },
  interactions: {
    url: (ctx, interaction) => `/interaction/${interaction.uid}`,
  },
  async findAccount(ctx, sub) {
    const account = accountsBySub.get(sub);
    if (!account) return undefined;
    return {
      accountId: sub,
      async claims() {
        return { ...(account.claims ?? {}), sub };
      },
    };
  },
  async renderError(ctx, out, error) {
    process.stderr.write(`error page: ${JSON.stringify(out)} ${error?.stack ?? ''}\n`);
    ctx.type = 'html';
    ctx.body = `<!doctype html><html><body><h1>Error</h1><pre id="error">${escapeHtml(JSON.stringify(out))}</pre></body></html>`;
  },
});

// Redirect URIs added at run time (POST /test-admin/redirect-uris), by client_id: exact matches.
const addedRedirectUris = new Map(clients.map((client) => [client.client_id, new Set()]));
const redirectUriAllowed = provider.Client.prototype.redirectUriAllowed;
provider.Client.prototype.redirectUriAllowed = function allowed(value) {
  return redirectUriAllowed.call(this, value) || !!addedRedirectUris.get(this.clientId)?.has(value);
};

async function addRedirectUri(ctx) {
  const token = config.admin_token;
  if (typeof token !== 'string' || !token || !sameText(ctx.get('authorization'), `Bearer ${token}`)) {
    ctx.throw(401, 'a wrong admin token');
  }
  let body;
  try {
    body = JSON.parse(await readBody(ctx.req));
  } catch {
    ctx.throw(400, 'the body is not JSON');
  }
  const uris = addedRedirectUris.get(body.client_id);
  if (!uris) ctx.throw(404, 'no such client');
  if (typeof body.redirect_uri !== 'string' || !URL.canParse(body.redirect_uri)) ctx.throw(400, 'redirect_uri is not a URL');
  uris.add(body.redirect_uri);
  ctx.status = 204;
}

// oidc-provider takes client_secret_basic and client_secret_post for one another; this provider holds
// a client to the method it was registered with, so that a test sees which one a client used.
const authMethods = new Map(clients.map((client) => [client.client_id, client.token_endpoint_auth_method]));

async function checkAuthMethod(ctx) {
  const body = await readBody(ctx.req);
  ctx.request.body = body; // read once here; oidc-provider parses it from there
  const form = new URLSearchParams(body);
  const basic = (ctx.get('authorization').match(/^Basic\s+(\S+)$/i) ?? [])[1];
  let clientId = form.get('client_id');
  let used = form.has('client_secret') ? 'client_secret_post' : undefined;
  if (basic) {
    const [id] = Buffer.from(basic, 'base64').toString('utf8').split(':');
    try {
      clientId = decodeURIComponent(id.replace(/\+/g, ' '));
    } catch {
      return true; // not a client of ours: oidc-provider answers
    }
    used = 'client_secret_basic';
  }
  const registered = authMethods.get(clientId);
  const secretMethods = ['client_secret_basic', 'client_secret_post'];
  if (used && secretMethods.includes(registered) && used !== registered) {
    ctx.status = 401;
    ctx.body = {
      error: 'invalid_client',
      error_description: `client ${clientId} is registered with ${registered}, not ${used}`,
    };
    return false;
  }
  return true;
}

// A grant of everything the client asked for: consent without asking.
async function grantConsent(details) {
  const { prompt: { details: missing }, params, session } = details;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scope] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scope.join(' '));
  }
  const grantId = await grant.save();
  return details.grantId ? { consent: {} } : { consent: { grantId } };
}

async function finish(ctx, result, mergeWithLastSubmission) {
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission });
  ctx.status = 303;
  ctx.redirect(returnTo);
}

provider.use(async (ctx, next) => {
  const started = Date.now();
  try {
    const show = ctx.path.match(/^\/interaction\/([\w-]+)$/);
    const login = ctx.path.match(/^\/interaction\/([\w-]+)\/login$/);
    if (ctx.path === new URL(provider.urlFor('token')).pathname && ctx.method === 'POST') {
      if (await checkAuthMethod(ctx)) await next();
    } else if (ctx.path === '/test-admin/redirect-uris' && ctx.method === 'POST') {
      await addRedirectUri(ctx);
    } else if (show && ctx.method === 'GET') {
      ctx.set('Cache-Control', 'no-store');
      const details = await provider.interactionDetails(ctx.req, ctx.res);
      if (details.prompt.name === 'login') {
        ctx.type = 'html';
        ctx.body = loginPage(details.uid, details.params.client_id);
      } else if (details.prompt.name === 'consent') {
        await finish(ctx, await grantConsent(details), true);
      } else {
        ctx.throw(501, `prompt ${details.prompt.name} is not implemented`);
      }
    } else if (login && ctx.method === 'POST') {
      ctx.set('Cache-Control', 'no-store');
      const details = await provider.interactionDetails(ctx.req, ctx.res);
      if (details.prompt.name !== 'login') ctx.throw(400, 'this interaction is not a login');
      const form = new URLSearchParams(await readBody(ctx.req));
      const account = accounts.find((candidate) => sameText(candidate.login, form.get('login') ?? ''));
      if (!account || !sameText(account.password, form.get('password') ?? '')) {
        ctx.status = 401;
        ctx.type = 'html';
        ctx.body = loginPage(details.uid, details.params.client_id, 'Wrong login or password.');
      } else {
        await finish(ctx, { login: { accountId: account.sub } }, false);
      }
    } else {
      await next();
    }
  } catch (err) {
    if (!ctx.path.startsWith('/interaction/') && !ctx.path.startsWith('/test-admin/')) throw err;
    process.stderr.write(`interaction error: ${err.stack ?? err}\n`);
    ctx.status = err.status ?? err.statusCode ?? 500;
    ctx.type = 'text';
    ctx.body = `${err.name}: ${err.message}\n`;
  } finally {
    if (config.log_requests !== false) {
      process.stderr.write(`${ctx.method} ${ctx.url} ${ctx.status} ${Date.now() - started}ms\n`);
    }
  }
});

server.on('request', provider.callback());
process.stdout.write(`READY ${issuer}\n`);

function stop(signal) {
  process.stderr.write(`stopping on ${signal}\n`);
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
