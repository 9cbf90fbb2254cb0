// A real OAuth 2.1 / OpenID authorization server for the mcpgate tests, built on the OpenID-certified
// npm package oidc-provider (pinned by scripts/install-test-deps.sh into .work/oidc; needs Node 22).
//
//   node server.mjs <port> <resource-url> [access-token-ttl-seconds]
//
// oidc-provider is loaded from $MCPGATE_OIDC_NODE_MODULES (written to .work/env.sh), else from
// <repo>/.work/oidc/node_modules.
//
// Binds 127.0.0.1 only (port 0 = ephemeral); once ready it prints one line on stdout:
//   listening on http://127.0.0.1:<port>
// which is also the issuer. Metadata (the same document at both): <issuer>/.well-known/
// oauth-authorization-server (RFC 8414) and <issuer>/.well-known/openid-configuration.
//
// What it offers a client such as mcpgate:
// - open Dynamic Client Registration (RFC 7591) at /reg, no initial access token; `application_type:
//   "web"` clients may register http://127.0.0.1 redirect URIs (the code flow allows http);
//   token_endpoint_auth_method client_secret_basic, client_secret_post, none (and the JWT ones);
// - authorization code + PKCE, S256 only and required for every client; `iss` in the
//   authorization response (RFC 9207);
// - Resource Indicators (RFC 8707): the only resource is <resource-url> with scope files:read;
//   its access tokens are opaque, for that audience, and the resource server checks them at the
//   introspection endpoint (/token/introspection) as the static client files-rs / rs-secret;
// - a refresh token for every client that registered the refresh_token grant, whether or not the
//   request asked for offline_access (see issueRefreshToken below);
// - the built-in development login page (any login name is the account id, e.g. alice; the
//   password is ignored) and consent page. Sign-in is asked on every authorization request, even
//   when the browser has a session, so one browser can sign in as alice and then as bob.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const nodeModules = process.env.MCPGATE_OIDC_NODE_MODULES
  || fileURLToPath(new URL('../../../.work/oidc/node_modules', import.meta.url));
const { default: Provider, errors, interactionPolicy } = await import(
  pathToFileURL(join(nodeModules, 'oidc-provider/lib/index.js')).href
);

const [portArg, resource, ttlArg] = process.argv.slice(2);
if (portArg === undefined || !resource) {
  console.error('usage: node server.mjs <port> <resource-url> [access-token-ttl-seconds]');
  process.exit(2);
}
const accessTokenTTL = Number(ttlArg ?? 3600);

// Bind first so that port 0 works: the issuer holds the bound port.
const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number(portArg), '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

// Ask for sign-in on every authorization request: the login prompt is requested unless this very
// request is resuming after the login page (then the interaction result carries `login`).
const policy = interactionPolicy.base();
policy.get('login').checks.add(new interactionPolicy.Check(
  'always_sign_in',
  'End-User authentication is required on every authorization request',
  (ctx) => (ctx.oidc.result?.login ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT),
));

const provider = new Provider(issuer, {
  clients: [{
    // The resource server's own credentials, used only to introspect tokens.
    client_id: 'files-rs',
    client_secret: 'rs-secret',
    grant_types: [],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  scopes: ['openid', 'offline_access', 'files:read'],
  responseTypes: ['code'],
  pkce: { required: () => true },
  interactions: { policy },
  // oidc-provider follows OpenID Connect and drops offline_access from an authorization request
  // without prompt=consent, so a plain OAuth request would get no refresh token: issue one to every
  // client that registered the refresh_token grant, and let tokens outlive the browser session.
  issueRefreshToken: (ctx, client) => client.grantTypeAllowed('refresh_token'),
  expiresWithSession: () => false,
  // Account ids are whatever was typed on the login page.
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    introspection: {
      enabled: true,
      // files-rs may introspect any token; any other client only its own.
      allowedPolicy: (ctx, client, token) => client.clientId === 'files-rs' || token.clientId === client.clientId,
    },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // A token request without `resource` gets the resource the authorization request named.
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        return { scope: 'files:read', audience: resource, accessTokenFormat: 'opaque', accessTokenTTL };
      },
    },
  },
  ttl: { AccessToken: accessTokenTTL },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  jwks: { keys: [{ ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }), use: 'sig', kid: 'test' }] },
  // Errors as plain JSON-ish text, readable in test logs.
  renderError: (ctx, out) => {
    ctx.type = 'html';
    ctx.body = `<!DOCTYPE html><html><head><title>oops</title></head><body><h1 id="error">${out.error}</h1><p id="error_description">${String(out.error_description ?? '').replace(/[<>&]/g, '')}</p></body></html>`;
  },
});
provider.on('server_error', (ctx, err) => console.error('oidc-as server_error:', err));

server.on('request', provider.callback());
process.stdout.write(`listening on ${issuer}\n`);
