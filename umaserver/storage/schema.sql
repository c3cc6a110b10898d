-- umaserver's SQLite schema: the whole current schema, applied as it is to a new database. It
-- ships inside the package (the top-level schema.sql links here); older databases are upgraded by
-- the ordered migrations of migrations/.
-- Secrets (client secrets, tokens, tickets) are stored only as SHA-256 digests (hex).
-- Every column that points at a row of another table leads an index (its primary key's or one of
-- its own): deleting that row (a client, a user, a fetched image) finds what points at it without
-- reading a whole table while it holds the database's one write lock.

CREATE TABLE IF NOT EXISTS clients (
    client_id        TEXT PRIMARY KEY,
    secret_digest    TEXT NOT NULL,
    name             TEXT NOT NULL,
    redirect_uris    TEXT NOT NULL DEFAULT '[]',   -- JSON array of strings
    push_claim_types TEXT NOT NULL DEFAULT '[]',   -- JSON array: claim types it may push
    created_at       INTEGER NOT NULL,
    -- RFC 7591 members beyond the columns (grant_types, response_types,
    -- token_endpoint_auth_method, logo_uri, client_uri, scope), as a JSON object.
    metadata         TEXT NOT NULL DEFAULT '{}',
    registration_digest TEXT                       -- RFC 7592 registration access token
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
    revoked    INTEGER NOT NULL DEFAULT 0,
    family     TEXT                                -- the code grant it came from, with its refreshes
);
-- Only a code grant's tokens have a family and a user: a client_credentials token is in neither index.
CREATE INDEX IF NOT EXISTS access_tokens_by_family ON access_tokens (family) WHERE family IS NOT NULL;
CREATE INDEX IF NOT EXISTS access_tokens_by_user ON access_tokens (user_sub) WHERE user_sub IS NOT NULL;
CREATE INDEX IF NOT EXISTS access_tokens_by_expiry ON access_tokens (expires_at);
CREATE INDEX IF NOT EXISTS access_tokens_by_client ON access_tokens (client_id);

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
-- With the ids in creation order: a list of an owner's sets at a server reads this index alone.
CREATE INDEX IF NOT EXISTS resource_sets_by_owner ON resource_sets (owner, client_id, created_at, id);
CREATE INDEX IF NOT EXISTS resource_sets_by_client ON resource_sets (client_id);

-- A permission ticket: one request for access to one resource set, handed by the RS to a client.
-- state: open (usable), granted (consumed by a grant), finished (refused or out of requests).
-- Rows outlive expiry by a day so that an expired ticket can be told apart from an unknown one.
CREATE TABLE IF NOT EXISTS tickets (
    digest          TEXT PRIMARY KEY,
    owner           TEXT NOT NULL,
    client_id       TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    resource_set_id TEXT NOT NULL REFERENCES resource_sets (id) ON DELETE CASCADE,
    scopes          TEXT NOT NULL,                 -- JSON array
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    requests        INTEGER NOT NULL DEFAULT 0,    -- authorization requests made with it
    state           TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'granted', 'finished'))
);
CREATE INDEX IF NOT EXISTS tickets_by_expiry ON tickets (expires_at);
CREATE INDEX IF NOT EXISTS tickets_by_resource_set ON tickets (resource_set_id);
CREATE INDEX IF NOT EXISTS tickets_by_client ON tickets (client_id);

-- Requesting party tokens. Each belongs to the AAT it was issued under; revoking that AAT
-- revokes them, and a new RPT for the AAT revokes its previous one. `seed` makes the token again
-- only together with a key derived from the configured secret_key (never stored), so that the
-- authorization request can hand an AAT its live RPT back; the seed alone reveals nothing.
CREATE TABLE IF NOT EXISTS rpts (
    digest           TEXT PRIMARY KEY,
    seed             TEXT NOT NULL,
    aat_digest       TEXT NOT NULL REFERENCES access_tokens (digest) ON DELETE CASCADE,
    client_id        TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    requesting_party TEXT NOT NULL,
    issued_at        INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    revoked          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS rpts_by_aat ON rpts (aat_digest, revoked);
CREATE INDEX IF NOT EXISTS rpts_by_expiry ON rpts (expires_at);
CREATE INDEX IF NOT EXISTS rpts_by_client ON rpts (client_id);

-- One permission per resource set in an RPT; a repeat grant merges scopes and renews expiry.
CREATE TABLE IF NOT EXISTS permissions (
    rpt_digest      TEXT NOT NULL REFERENCES rpts (digest) ON DELETE CASCADE,
    resource_set_id TEXT NOT NULL REFERENCES resource_sets (id) ON DELETE CASCADE,
    scopes          TEXT NOT NULL,                 -- JSON array
    issued_at       INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    PRIMARY KEY (rpt_digest, resource_set_id)
);
CREATE INDEX IF NOT EXISTS permissions_by_resource_set ON permissions (resource_set_id);

-- Claims gathered for one ticket about one requesting party, with their provenance. Never reused
-- for another ticket or party. A re-push of the same type and name by the same issuer replaces the
-- value: an earlier value never keeps counting beside a newer one. `subject` is whom a verified
-- claim is about at its issuer (an ID token's sub, an assertion's NameID), NULL for a client's plain
-- word; the service keeps one subject per issuer per ticket and party.
CREATE TABLE IF NOT EXISTS gathered_claims (
    ticket_digest    TEXT NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    requesting_party TEXT NOT NULL,
    type             TEXT NOT NULL,
    name             TEXT NOT NULL,
    issuer           TEXT NOT NULL,
    subject          TEXT,
    value            TEXT NOT NULL,                -- JSON
    client_id        TEXT NOT NULL,
    gathered_at      INTEGER NOT NULL,
    PRIMARY KEY (ticket_digest, requesting_party, type, name, issuer)
);

-- SAML assertion IDs and ID tokens already accepted, remembered until they expire (replay
-- detection).
CREATE TABLE IF NOT EXISTS seen_assertions (
    issuer           TEXT NOT NULL,
    assertion_id     TEXT NOT NULL,
    ticket_digest    TEXT NOT NULL,
    requesting_party TEXT NOT NULL,
    expires_at       INTEGER NOT NULL,
    PRIMARY KEY (issuer, assertion_id, ticket_digest)
);
CREATE INDEX IF NOT EXISTS seen_assertions_by_expiry ON seen_assertions (expires_at);

-- The redirect claims profile: a claims handle is the `value` of a `redirect_required` entry (its
-- digest), bound to the ticket, the client and the requesting party of the AAT it was made for, and,
-- once the person arrives at /rqp_claims, to that browser (`binding_digest`). `state`: open, used
-- (the gathering finished) or void (a later request on the ticket replaced it).
CREATE TABLE IF NOT EXISTS claims_handles (
    digest           TEXT PRIMARY KEY,
    ticket_digest    TEXT NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    client_id        TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    requesting_party TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    binding_digest   TEXT,
    state            TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'used', 'void'))
);
CREATE INDEX IF NOT EXISTS claims_handles_by_ticket ON claims_handles (ticket_digest);
CREATE INDEX IF NOT EXISTS claims_handles_by_expiry ON claims_handles (expires_at);
CREATE INDEX IF NOT EXISTS claims_handles_by_client ON claims_handles (client_id);

-- The migrations applied to this database (migrations/NNNN_*.sql); a database without this table
-- has the schema of version 1.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    applied_at INTEGER NOT NULL
);

-- Signed-in people: a session is found by the digest of its cookie's random id. Sign-in failures
-- are counted per account and per account and address, to slow down guessing.
CREATE TABLE IF NOT EXISTS sessions (
    digest       TEXT PRIMARY KEY,
    user_sub     TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    csrf_secret  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions (user_sub);
CREATE INDEX IF NOT EXISTS sessions_by_expiry ON sessions (expires_at);
CREATE TABLE IF NOT EXISTS signin_failures (
    key       TEXT NOT NULL,
    failed_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS signin_failures_by_key ON signin_failures (key, failed_at);
CREATE INDEX IF NOT EXISTS signin_failures_by_time ON signin_failures (failed_at);
CREATE TABLE IF NOT EXISTS authorization_codes (
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
CREATE INDEX IF NOT EXISTS authorization_codes_by_expiry ON authorization_codes (expires_at);
CREATE INDEX IF NOT EXISTS authorization_codes_by_client ON authorization_codes (client_id);
CREATE INDEX IF NOT EXISTS authorization_codes_by_user ON authorization_codes (user_sub);
CREATE TABLE IF NOT EXISTS refresh_tokens (
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
CREATE INDEX IF NOT EXISTS refresh_tokens_by_family ON refresh_tokens (family);
CREATE INDEX IF NOT EXISTS refresh_tokens_by_expiry ON refresh_tokens (expires_at);
CREATE INDEX IF NOT EXISTS refresh_tokens_by_client ON refresh_tokens (client_id);
CREATE INDEX IF NOT EXISTS refresh_tokens_by_user ON refresh_tokens (user_sub);
CREATE TABLE IF NOT EXISTS consents (
    user_sub   TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    client_id  TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    scope      TEXT NOT NULL,
    granted_at INTEGER NOT NULL,
    PRIMARY KEY (user_sub, client_id, scope)
);
CREATE INDEX IF NOT EXISTS consents_by_client ON consents (client_id);
CREATE TABLE IF NOT EXISTS initial_access_tokens (
    digest           TEXT PRIMARY KEY,
    push_claim_types TEXT NOT NULL DEFAULT '[]',
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS identity_links (
    issuer    TEXT NOT NULL,
    subject   TEXT NOT NULL,
    user_sub  TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    linked_at INTEGER NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX IF NOT EXISTS identity_links_by_user ON identity_links (user_sub);

-- Owners' own rules, made on their policy pages: each the rule as a table of the rule file in JSON
-- (the rule file's reader checks it when it is used). The version of an owner's rules is bumped in
-- the transaction of every change: it tells every process when to read them again.
CREATE TABLE IF NOT EXISTS owner_rules (
    id         TEXT PRIMARY KEY,                   -- 'o-<random>': never one of the file's ids
    owner      TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    rule       TEXT NOT NULL,                      -- JSON object: the rule file's table
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS owner_rules_by_owner ON owner_rules (owner, created_at);
CREATE TABLE IF NOT EXISTS owner_rule_versions (
    owner   TEXT PRIMARY KEY REFERENCES users (sub) ON DELETE CASCADE,
    version INTEGER NOT NULL
);

-- What registrations point at, checked in the background: the queue and cache of fetched URIs,
-- and the images that passed the check (see migrations/0008_fetched_content.sql).
CREATE TABLE IF NOT EXISTS fetched_images (
    id           TEXT PRIMARY KEY,
    content_type TEXT NOT NULL
        CHECK (content_type IN ('image/png', 'image/jpeg', 'image/gif', 'image/webp')),
    bytes        BLOB NOT NULL,
    size         INTEGER NOT NULL,
    fetched_at   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS fetched_uris (
    id            TEXT PRIMARY KEY,
    uri           TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('scope', 'image', 'page')),
    status        TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'checked', 'failed')),
    name          TEXT,
    icon_uri      TEXT,
    content_type  TEXT,
    image_id      TEXT REFERENCES fetched_images (id) ON DELETE SET NULL,
    reason        TEXT,
    created_at    INTEGER NOT NULL,
    checked_at    INTEGER,
    expires_at    INTEGER,
    failures      INTEGER NOT NULL DEFAULT 0,
    next_try_at   INTEGER NOT NULL,
    claimed_until INTEGER NOT NULL DEFAULT 0,
    UNIQUE (uri, kind)
);
CREATE INDEX IF NOT EXISTS fetched_uris_by_next_try ON fetched_uris (next_try_at);
CREATE INDEX IF NOT EXISTS fetched_uris_by_image ON fetched_uris (image_id);
