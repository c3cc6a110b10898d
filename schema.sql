-- umaserver's SQLite schema. Applied by `python -m umaserver init` (and by `serve` on start):
-- every statement is idempotent, so running it again upgrades an older database in place.
-- Secrets (client secrets, tokens, tickets) are stored only as SHA-256 digests (hex).

CREATE TABLE IF NOT EXISTS clients (
    client_id        TEXT PRIMARY KEY,
    secret_digest    TEXT NOT NULL,
    name             TEXT NOT NULL,
    redirect_uris    TEXT NOT NULL DEFAULT '[]',   -- JSON array of strings
    push_claim_types TEXT NOT NULL DEFAULT '[]',   -- JSON array: claim types it may push
    created_at       INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS users (
    sub           TEXT PRIMARY KEY,                -- opaque, random
    username      TEXT NOT NULL UNIQUE,
    password_hash TEXT,                            -- NULL: cannot sign in with a password
    claims        TEXT NOT NULL DEFAULT '{}',      -- JSON object of attributes
    created_at    INTEGER NOT NULL
);

-- PATs and AATs. user_sub NULL: a client_credentials token, the client acts for itself.
CREATE TABLE IF NOT EXISTS access_tokens (
    digest     TEXT PRIMARY KEY,
    client_id  TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    user_sub   TEXT REFERENCES users (sub) ON DELETE CASCADE,
    scope      TEXT NOT NULL,
    issued_at  INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked    INTEGER NOT NULL DEFAULT 0
);

-- owner: the user's sub, or 'client:<client_id>' for a client acting for itself.
-- client_id: the resource server that registered it; only that RS of that owner sees it.
CREATE TABLE IF NOT EXISTS resource_sets (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    client_id   TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    type        TEXT,
    description TEXT NOT NULL,                     -- JSON object as registered (extensions kept)
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS resource_sets_by_owner ON resource_sets (owner, client_id);
