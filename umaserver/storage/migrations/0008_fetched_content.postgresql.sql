-- Version 8 on PostgreSQL, where its history starts: the whole schema as it was when this backend
-- came, applied to a new database with the later versions in one transaction. (SQLite's databases
-- reached version 8 through 0001 to 0008 of their own.) It has SQLite's tables and columns, whose
-- meaning the SQLite steps document, with PostgreSQL's types:
--   * text compares as bytes (COLLATE "C"), as SQLite's does: usernames, names and ids sort and
--     page (`resource_sets_of`) the same on both backends, whatever the database's locale;
--   * times are BIGINT seconds, flags BOOLEAN, images BYTEA, JSON documents TEXT as written;
--   * `seq` (an identity column) keeps the order rows were added in, where SQLite reads `rowid`.
-- Secrets (client secrets, tokens, tickets) are stored only as SHA-256 digests (hex).

CREATE TABLE schema_migrations (
    version    INTEGER PRIMARY KEY,
    applied_at BIGINT NOT NULL
);

CREATE TABLE clients (
    client_id           TEXT COLLATE "C" PRIMARY KEY,
    secret_digest       TEXT COLLATE "C" NOT NULL,
    name                TEXT COLLATE "C" NOT NULL,
    redirect_uris       TEXT NOT NULL DEFAULT '[]',
    push_claim_types    TEXT NOT NULL DEFAULT '[]',
    created_at          BIGINT NOT NULL,
    metadata            TEXT NOT NULL DEFAULT '{}',
    registration_digest TEXT COLLATE "C",
    seq                 BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
);

CREATE TABLE users (
    sub           TEXT COLLATE "C" PRIMARY KEY,
    username      TEXT COLLATE "C" NOT NULL UNIQUE,
    password_hash TEXT COLLATE "C",
    claims        TEXT NOT NULL DEFAULT '{}',
    created_at    BIGINT NOT NULL
);

CREATE TABLE access_tokens (
    digest     TEXT COLLATE "C" PRIMARY KEY,
    client_id  TEXT COLLATE "C" NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    user_sub   TEXT COLLATE "C" REFERENCES users (sub) ON DELETE CASCADE,
    scope      TEXT COLLATE "C" NOT NULL,
    issued_at  BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked    BOOLEAN NOT NULL DEFAULT FALSE,
    family     TEXT COLLATE "C"
);
CREATE INDEX access_tokens_by_family ON access_tokens (family);
CREATE INDEX access_tokens_by_expiry ON access_tokens (expires_at);
CREATE INDEX access_tokens_by_client ON access_tokens (client_id);
CREATE INDEX access_tokens_by_user ON access_tokens (user_sub);

CREATE TABLE resource_sets (
    id          TEXT COLLATE "C" PRIMARY KEY,
    owner       TEXT COLLATE "C" NOT NULL,
    client_id   TEXT COLLATE "C" NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    name        TEXT COLLATE "C" NOT NULL,
    type        TEXT COLLATE "C",
    description TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    seq         BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
);
CREATE INDEX resource_sets_by_owner ON resource_sets (owner, client_id);
CREATE INDEX resource_sets_by_owner_and_name ON resource_sets (owner, name, id);
CREATE INDEX resource_sets_by_client ON resource_sets (client_id);

CREATE TABLE tickets (
    digest          TEXT COLLATE "C" PRIMARY KEY,
    owner           TEXT COLLATE "C" NOT NULL,
    client_id       TEXT COLLATE "C" NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    resource_set_id TEXT COLLATE "C" NOT NULL REFERENCES resource_sets (id) ON DELETE CASCADE,
    scopes          TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    requests        INTEGER NOT NULL DEFAULT 0,
    state           TEXT COLLATE "C" NOT NULL DEFAULT 'open'
        CHECK (state IN ('open', 'granted', 'finished')),
    seq             BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
);
CREATE INDEX tickets_by_expiry ON tickets (expires_at);
CREATE INDEX tickets_by_resource_set ON tickets (resource_set_id);
CREATE INDEX tickets_by_client ON tickets (client_id);

CREATE TABLE rpts (
    digest           TEXT COLLATE "C" PRIMARY KEY,
    seed             TEXT COLLATE "C" NOT NULL,
    aat_digest       TEXT COLLATE "C" NOT NULL REFERENCES access_tokens (digest) ON DELETE CASCADE,
    client_id        TEXT COLLATE "C" NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    requesting_party TEXT COLLATE "C" NOT NULL,
    issued_at        BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    revoked          BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX rpts_by_aat ON rpts (aat_digest, revoked);
CREATE INDEX rpts_by_expiry ON rpts (expires_at);
CREATE INDEX rpts_by_client ON rpts (client_id);

CREATE TABLE permissions (
    rpt_digest      TEXT COLLATE "C" NOT NULL REFERENCES rpts (digest) ON DELETE CASCADE,
    resource_set_id TEXT COLLATE "C" NOT NULL REFERENCES resource_sets (id) ON DELETE CASCADE,
    scopes          TEXT NOT NULL,
    issued_at       BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    PRIMARY KEY (rpt_digest, resource_set_id)
);
CREATE INDEX permissions_by_resource_set ON permissions (resource_set_id);

CREATE TABLE gathered_claims (
    ticket_digest    TEXT COLLATE "C" NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    requesting_party TEXT COLLATE "C" NOT NULL,
    type             TEXT COLLATE "C" NOT NULL,
    name             TEXT COLLATE "C" NOT NULL,
    issuer           TEXT COLLATE "C" NOT NULL,
    subject          TEXT COLLATE "C",
    value            TEXT NOT NULL,
    client_id        TEXT COLLATE "C" NOT NULL,
    gathered_at      BIGINT NOT NULL,
    PRIMARY KEY (ticket_digest, requesting_party, type, name, issuer)
);

CREATE TABLE seen_assertions (
    issuer           TEXT COLLATE "C" NOT NULL,
    assertion_id     TEXT COLLATE "C" NOT NULL,
    ticket_digest    TEXT COLLATE "C" NOT NULL,
    requesting_party TEXT COLLATE "C" NOT NULL,
    expires_at       BIGINT NOT NULL,
    PRIMARY KEY (issuer, assertion_id, ticket_digest)
);
CREATE INDEX seen_assertions_by_expiry ON seen_assertions (expires_at);

CREATE TABLE claims_handles (
    digest           TEXT COLLATE "C" PRIMARY KEY,
    ticket_digest    TEXT COLLATE "C" NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    client_id        TEXT COLLATE "C" NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    requesting_party TEXT COLLATE "C" NOT NULL,
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    binding_digest   TEXT COLLATE "C",
    state            TEXT COLLATE "C" NOT NULL DEFAULT 'open'
        CHECK (state IN ('open', 'used', 'void'))
);
CREATE INDEX claims_handles_by_ticket ON claims_handles (ticket_digest);
CREATE INDEX claims_handles_by_expiry ON claims_handles (expires_at);
CREATE INDEX claims_handles_by_client ON claims_handles (client_id);

CREATE TABLE sessions (
    digest       TEXT COLLATE "C" PRIMARY KEY,
    user_sub     TEXT COLLATE "C" NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    csrf_secret  TEXT COLLATE "C" NOT NULL,
    created_at   BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL
);
CREATE INDEX sessions_by_user ON sessions (user_sub);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);

CREATE TABLE signin_failures (
    key       TEXT COLLATE "C" NOT NULL,
    failed_at BIGINT NOT NULL,
    seq       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY
);
CREATE INDEX signin_failures_by_key ON signin_failures (key, failed_at);
CREATE INDEX signin_failures_by_time ON signin_failures (failed_at);

CREATE TABLE authorization_codes (
    digest                TEXT COLLATE "C" PRIMARY KEY,
    client_id             TEXT COLLATE "C" NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    user_sub              TEXT COLLATE "C" NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    redirect_uri          TEXT COLLATE "C" NOT NULL,
    scope                 TEXT COLLATE "C" NOT NULL,
    code_challenge        TEXT COLLATE "C",
    code_challenge_method TEXT COLLATE "C",
    family                TEXT COLLATE "C" NOT NULL,
    created_at            BIGINT NOT NULL,
    expires_at            BIGINT NOT NULL,
    used                  BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX authorization_codes_by_expiry ON authorization_codes (expires_at);
CREATE INDEX authorization_codes_by_client ON authorization_codes (client_id);
CREATE INDEX authorization_codes_by_user ON authorization_codes (user_sub);

CREATE TABLE refresh_tokens (
    digest     TEXT COLLATE "C" PRIMARY KEY,
    family     TEXT COLLATE "C" NOT NULL,
    client_id  TEXT COLLATE "C" NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    user_sub   TEXT COLLATE "C" NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    scope      TEXT COLLATE "C" NOT NULL,
    issued_at  BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used       BOOLEAN NOT NULL DEFAULT FALSE,
    revoked    BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX refresh_tokens_by_family ON refresh_tokens (family);
CREATE INDEX refresh_tokens_by_expiry ON refresh_tokens (expires_at);
CREATE INDEX refresh_tokens_by_client ON refresh_tokens (client_id);
CREATE INDEX refresh_tokens_by_user ON refresh_tokens (user_sub);

CREATE TABLE consents (
    user_sub   TEXT COLLATE "C" NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    client_id  TEXT COLLATE "C" NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    scope      TEXT COLLATE "C" NOT NULL,
    granted_at BIGINT NOT NULL,
    PRIMARY KEY (user_sub, client_id, scope)
);
CREATE INDEX consents_by_client ON consents (client_id);

CREATE TABLE initial_access_tokens (
    digest           TEXT COLLATE "C" PRIMARY KEY,
    push_claim_types TEXT NOT NULL DEFAULT '[]',
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL
);

CREATE TABLE identity_links (
    issuer    TEXT COLLATE "C" NOT NULL,
    subject   TEXT COLLATE "C" NOT NULL,
    user_sub  TEXT COLLATE "C" NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    linked_at BIGINT NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX identity_links_by_user ON identity_links (user_sub);

CREATE TABLE owner_rules (
    id         TEXT COLLATE "C" PRIMARY KEY,
    owner      TEXT COLLATE "C" NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    rule       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    seq        BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
);
CREATE INDEX owner_rules_by_owner ON owner_rules (owner, created_at);
CREATE TABLE owner_rule_versions (
    owner   TEXT COLLATE "C" PRIMARY KEY REFERENCES users (sub) ON DELETE CASCADE,
    version BIGINT NOT NULL
);

CREATE TABLE fetched_images (
    id           TEXT COLLATE "C" PRIMARY KEY,
    content_type TEXT COLLATE "C" NOT NULL
        CHECK (content_type IN ('image/png', 'image/jpeg', 'image/gif', 'image/webp')),
    bytes        BYTEA NOT NULL,
    size         BIGINT NOT NULL,
    fetched_at   BIGINT NOT NULL
);
CREATE TABLE fetched_uris (
    id            TEXT COLLATE "C" PRIMARY KEY,
    uri           TEXT COLLATE "C" NOT NULL,
    kind          TEXT COLLATE "C" NOT NULL CHECK (kind IN ('scope', 'image', 'page')),
    status        TEXT COLLATE "C" NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'checked', 'failed')),
    name          TEXT COLLATE "C",
    icon_uri      TEXT COLLATE "C",
    content_type  TEXT COLLATE "C",
    image_id      TEXT COLLATE "C" REFERENCES fetched_images (id) ON DELETE SET NULL,
    reason        TEXT COLLATE "C",
    created_at    BIGINT NOT NULL,
    checked_at    BIGINT,
    expires_at    BIGINT,
    failures      INTEGER NOT NULL DEFAULT 0,
    next_try_at   BIGINT NOT NULL,
    claimed_until BIGINT NOT NULL DEFAULT 0,
    UNIQUE (uri, kind)
);
CREATE INDEX fetched_uris_by_next_try ON fetched_uris (next_try_at);
CREATE INDEX fetched_uris_by_image ON fetched_uris (image_id);
