// The upstream authorization server of tests/connect/: oidc-provider (pinned in package.json, OpenID Certified)
// on 127.0.0.1, a free port, issuing JWT access tokens for one resource (RFC 8707) and rotating refresh tokens.
// argv: <hopline's redirect URI> <client secret> <resource> <access token TTL seconds>.
// Clients: hopline (client_secret_basic), hopline-post (client_secret_post), hopline-public (none).
// Its development login form accepts any login (the account id is the login). Prints {"issuer": ...} once up.
import http from "node:http";
import Provider, { errors } from "oidc-provider";

const [redirectUri, clientSecret, resource, ttl] = process.argv.slice(2);
const client = (id, method, secret) => ({
  client_id: id,
  ...(secret ? { client_secret: secret } : {}),
  redirect_uris: [redirectUri],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: method,
});

const server = http.createServer();
server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [
      client("hopline", "client_secret_basic", clientSecret),
      client("hopline-post", "client_secret_post", clientSecret),
      client("hopline-public", "none"),
    ],
    findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    scopes: ["openid", "offline_access", "tools:read"],
    features: {
      devInteractions: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, indicator) => {
          if (indicator !== resource) throw new errors.InvalidTarget();
          return { scope: "tools:read", audience: resource, accessTokenFormat: "jwt", accessTokenTTL: Number(ttl) };
        },
      },
    },
    issueRefreshToken: () => true,
    rotateRefreshToken: true,
    pkce: { required: () => true },
    cookies: { keys: ["test-only-cookie-signing-key"] },
  });
  server.on("request", provider.callback());
  console.log(JSON.stringify({ issuer }));
});
