-- Version 4: people sign in (sessions, sign-in failures), the authorization code flow (codes,
-- refresh tokens, consents), and dynamic client registration (client metadata, registration
-- access tokens, initial access tokens). Secrets are stored only as SHA-256 digests. Also the
-- indexes pruning and scope removal look for: access tokens by expiry, tickets by resource set.
ALTER TABLE clients ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE clients ADD COLUMN registration_digest TEXT;
ALTER TABLE access_tokens ADD COLUMN family TEXT;
CREATE INDEX access_tokens_by_family ON access_tokens (family);
CREATE INDEX access_tokens_by_expiry ON access_tokens (expires_at);
CREATE INDEX tickets_by_resource_set ON tickets (resource_set_id);
CREATE TABLE sessions (
    digest       TEXT PRIMARY KEY,
    user_sub     TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    csrf_secret  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
);
CREATE INDEX sessions_by_user ON sessions (user_sub);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);
CREATE TABLE signin_failures (
    key       TEXT NOT NULL,
    failed_at INTEGER NOT NULL
);
CREATE INDEX signin_failures_by_key ON signin_failures (key, failed_at);
CREATE TABLE authorization_codes (
    digest                TEXT PRIMARY KEY,
    client_id             TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    user_sub              TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    redirect_uri          TEXT NOT NULL,
    scope                 TEXT NOT NULL,
    code_challenge        TEXT,
    code_challenge_method TEXT,
    family                TEXT NOT NULL,
    created_at            INTEGER NOT NULL,
    expires_at            INTEGER NOT NULL,
    used                  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX authorization_codes_by_expiry ON authorization_codes (expires_at);
CREATE TABLE refresh_tokens (
    digest     TEXT PRIMARY KEY,
    family     TEXT NOT NULL,
    client_id  TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    user_sub   TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    scope      TEXT NOT NULL,
    issued_at  INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used       INTEGER NOT NULL DEFAULT 0,
    revoked    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX refresh_tokens_by_family ON refresh_tokens (family);
CREATE INDEX refresh_tokens_by_expiry ON refresh_tokens (expires_at);
CREATE TABLE consents (
    user_sub   TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    client_id  TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    scope      TEXT NOT NULL,
    granted_at INTEGER NOT NULL,
    PRIMARY KEY (user_sub, client_id, scope)
);
CREATE TABLE initial_access_tokens (
    digest           TEXT PRIMARY KEY,
    push_claim_types TEXT NOT NULL DEFAULT '[]',
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL
);
