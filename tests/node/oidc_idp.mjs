// The upstream identity provider of tests/signin/: oidc-provider (pinned in package.json, OpenID Certified)
// on 127.0.0.1, a free port. argv: <hopline's redirect URI> <hopline's client secret>.
// Its development login form (devInteractions) accepts any login; the accounts below give claims to two.
// Prints one JSON line {"issuer": "http://127.0.0.1:PORT"} once listening.
import http from "node:http";
import Provider from "oidc-provider";

const [redirectUri, clientSecret] = process.argv.slice(2);
const ACCOUNTS = {
  alice: { email: "alice@example.com", groups: ["eng"], roles: ["admin"] },
  bob: { email: "bob@example.com", groups: ["sales"], roles: [] },
};

const server = http.createServer();
server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: "hopline",
        client_secret: clientSecret,
        redirect_uris: [redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    findAccount: async (ctx, id) => ({
      accountId: id,
      claims: async () => ({ sub: id, ...(ACCOUNTS[id] || {}) }),
    }),
    claims: { openid: ["sub"], email: ["email"], groups: ["groups", "roles"] },
    conformIdTokenClaims: false, // the scopes' claims go in the ID token too
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    cookies: { keys: ["test-only-cookie-signing-key"] },
  });
  server.on("request", provider.callback());
  console.log(JSON.stringify({ issuer }));
});
