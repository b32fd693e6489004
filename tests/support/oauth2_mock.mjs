// A real OAuth 2.0 authorization server on loopback for the end-to-end tests: the npm package
// oauth2-mock-server (authorization code with PKCE, client credentials, refresh tokens, RS256 JWTs).
//
//   node tests/support/oauth2_mock.mjs [--port 0] [--expires-in SECONDS] [--rotate-refresh-tokens]
//
// --rotate-refresh-tokens: every refresh token works once (RFC 9700 section 4.14.2), as with providers
// that rotate them: a second use of one, or one this server never issued, answers 400 invalid_grant.
//
// Prints one JSON object per line on stdout: {"event": "ready", "url": ...} once listening, then one
// line per authorize redirect and per token response (what the gateway sent and what it got), so
// tests can check PKCE, state and client authentication; and {"event": "request", method, path}
// for every request. Reads commands on stdin, one per line:
//   reject-next-token      the next token request answers 400 invalid_grant
//   deny-next-authorize    the next authorization answers error=access_denied instead of a code
//   user NAME [G1,G2]      later authorizations sign in as NAME (claim sub, and groups G1, G2); the
//                          user sticks to the code and to the refresh tokens issued from it
//   access-ttl SECONDS     access tokens issued from now on expire after SECONDS (the JWT's exp)
//   opaque TOKEN SUB AUD [TTL]  TOKEN (not a JWT) is active for SUB at resource AUD, scope mcp, for
//                          TTL seconds (300): /introspect (RFC 7662, form-encoded, client authenticated
//                          with HTTP Basic, else 401) answers its claims, and {"active": false} for
//                          any other token; one {"event": "introspect"} line per request
//   any other line         only acknowledged ({"event": "ack"}): a barrier, since the ack comes after
//                          every line the server wrote before it (oauth2_server.py's events())
// An access token carries aud = the RFC 8707 `resource` the client asked for (when it asked), azp =
// the client id, and the scope granted at the authorize step when the token request names none.
// Exits when stdin closes (the test process ended).
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import express from "express";
import { OAuth2Server } from "oauth2-mock-server";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const port = Number(option("--port", "0"));
const expiresIn = option("--expires-in", undefined);
const rotate = args.includes("--rotate-refresh-tokens");
const liveRefreshTokens = new Set();

const emit = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const server = new OAuth2Server();
await server.issuer.keys.generate("RS256");

// A unique id in every token (RFC 7519 section 4.1.7): two tokens signed in the same second with
// the same claims would otherwise be byte for byte the same, and a revoked one would look renewed.
let rejectNextToken = false;
let denyNextAuthorize = false;
let currentUser = null; // {sub, groups} signed in by later authorizations
let accessTtl = null;
const grants = new Map(); // authorization code or refresh token -> {user, scope}
const opaqueTokens = new Map(); // opaque access token -> its introspection claims

// The package's /introspect reads JSON bodies only; RFC 7662 requests are form-encoded, so a form
// parser goes first in the router for that route.
const app = server.service.requestHandler;
app.post("/introspect", express.urlencoded({ extended: false }));
app.router.stack.unshift(app.router.stack.pop());
// Every request's method and path, first of all (a client that read the gateway's protected
// resource metadata comes here for the authorization server's metadata).
app.use((req, _res, next) => {
  emit({ event: "request", method: req.method, path: req.path });
  next();
});
app.router.stack.unshift(app.router.stack.pop());

server.service.on("beforeIntrospect", (response, req) => {
  const auth = req.headers.authorization ?? "";
  const basic = auth.startsWith("Basic ");
  const claims = opaqueTokens.get(req.body?.token ?? "");
  emit({ event: "introspect", client_auth: basic ? "basic" : "none", basic_header: basic ? auth : null, known: !!claims });
  if (!basic) {
    response.statusCode = 401;
    response.body = { error: "invalid_client" };
  } else {
    response.body = claims && claims.exp > Date.now() / 1000 ? { active: true, ...claims } : { active: false };
  }
});

server.service.on("beforeTokenSigning", (token, req) => {
  token.payload.jti = randomUUID();
  const body = req.body ?? {};
  if (token.payload.aud !== undefined && token.payload.scope === undefined) return; // the id token
  const grant = grants.get(body.code ?? body.refresh_token ?? "");
  if (grant?.user) {
    token.payload.sub = grant.user.sub;
    if (grant.user.groups.length) token.payload.groups = grant.user.groups;
  }
  if (grant?.scope && !body.scope) token.payload.scope = grant.scope;
  if (token.payload.sub === undefined && body.grant_type === "client_credentials") {
    token.payload.sub = currentUser?.sub ?? body.client_id;
  }
  if (body.resource) token.payload.aud = body.resource;
  if (body.client_id) token.payload.azp = body.client_id;
  if (accessTtl !== null) token.payload.exp = token.payload.iat + accessTtl;
});

server.service.on("beforeAuthorizeRedirect", (redirect, req) => {
  const q = req.query;
  const code = redirect.url.searchParams.get("code");
  if (code) grants.set(code, { user: currentUser, scope: q.scope ?? null });
  if (denyNextAuthorize) {
    denyNextAuthorize = false;
    redirect.url.searchParams.delete("code");
    redirect.url.searchParams.set("error", "access_denied");
  }
  emit({
    event: "authorize",
    client_id: q.client_id ?? null,
    redirect_uri: q.redirect_uri ?? null,
    scope: q.scope ?? null,
    state: q.state ?? null,
    code_challenge: q.code_challenge ?? null,
    code_challenge_method: q.code_challenge_method ?? null,
    denied: redirect.url.searchParams.has("error"),
  });
});

server.service.on("beforeResponse", (response, req) => {
  const body = req.body ?? {};
  const basic = (req.headers.authorization ?? "").startsWith("Basic ");
  let reused = false;
  if (rejectNextToken) {
    rejectNextToken = false;
    response.statusCode = 400;
    response.body = { error: "invalid_grant" };
  } else if (rotate && body.grant_type === "refresh_token" && !liveRefreshTokens.delete(body.refresh_token)) {
    reused = true;
    response.statusCode = 400;
    response.body = { error: "invalid_grant" };
  } else if (expiresIn !== undefined && response.statusCode === 200) {
    response.body.expires_in = Number(expiresIn);
  }
  if (response.statusCode === 200 && response.body.refresh_token) {
    grants.set(response.body.refresh_token, grants.get(body.code ?? body.refresh_token ?? "") ?? {});
  }
  if (rotate && response.statusCode === 200 && response.body.refresh_token) {
    liveRefreshTokens.add(response.body.refresh_token);
  }
  emit({
    event: "token",
    grant_type: body.grant_type ?? null,
    client_auth: basic ? "basic" : body.client_secret ? "post" : "none",
    basic_header: basic ? req.headers.authorization : null,
    client_id: body.client_id ?? null,
    client_secret: body.client_secret ?? null,
    has_code_verifier: typeof body.code_verifier === "string",
    redirect_uri: body.redirect_uri ?? null,
    scope: body.scope ?? null,
    status: response.statusCode,
    access_token: response.body.access_token ?? null,
    refresh_token: response.body.refresh_token ?? null,
    refresh_token_sent: body.refresh_token ?? null,
    reused_refresh_token: reused,
  });
});

await server.start(port, "127.0.0.1");
// The issuer defaults to http://localhost:PORT; tests reach only 127.0.0.1, so name it that way.
server.issuer.url = `http://127.0.0.1:${server.address().port}`;
emit({ event: "ready", url: server.issuer.url });

const commands = createInterface({ input: process.stdin });
commands.on("line", (line) => {
  if (line.trim() === "reject-next-token") rejectNextToken = true;
  if (line.trim() === "deny-next-authorize") denyNextAuthorize = true;
  const [word, arg, groups] = line.trim().split(/\s+/);
  if (word === "user") currentUser = { sub: arg, groups: groups ? groups.split(",") : [] };
  if (word === "access-ttl") accessTtl = Number(arg);
  if (word === "opaque") {
    const [, token, sub, aud, ttl] = line.trim().split(/\s+/);
    const now = Math.floor(Date.now() / 1000);
    opaqueTokens.set(token, {
      iss: server.issuer.url, sub, aud, scope: "mcp", client_id: "claude-code-test", iat: now, exp: now + Number(ttl ?? 300),
    });
  }
  emit({ event: "ack", command: line.trim() });
});
commands.on("close", async () => {
  await server.stop();
  process.exit(0);
});
