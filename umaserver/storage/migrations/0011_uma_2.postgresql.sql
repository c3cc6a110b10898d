-- Version 11 (SQLite's 0011 says what each change is for): several (set, scopes) pairs per ticket,
-- a ticket's requesting party, RPTs without an AAT, persisted claims tokens, and the uma-ticket
-- grant for confidential clients registered with a list of grant types.
ALTER TABLE tickets ADD COLUMN requesting_party TEXT COLLATE "C";
ALTER TABLE tickets ADD COLUMN pairs INTEGER NOT NULL DEFAULT 1;
ALTER TABLE gathered_claims ADD COLUMN expires_at BIGINT;
CREATE TABLE ticket_resources (
    ticket_digest   TEXT COLLATE "C" NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    position        INTEGER NOT NULL,
    resource_set_id TEXT COLLATE "C" NOT NULL REFERENCES resource_sets (id) ON DELETE CASCADE,
    scopes          TEXT NOT NULL,
    PRIMARY KEY (ticket_digest, position)
);
CREATE INDEX ticket_resources_by_resource_set ON ticket_resources (resource_set_id);

ALTER TABLE rpts ALTER COLUMN aat_digest DROP NOT NULL;

CREATE TABLE pcts (
    digest           TEXT COLLATE "C" PRIMARY KEY,
    client_id        TEXT COLLATE "C" NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    requesting_party TEXT COLLATE "C" NOT NULL,
    user_sub         TEXT COLLATE "C" REFERENCES users (sub) ON DELETE CASCADE,
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    revoked          BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX pcts_by_client ON pcts (client_id);
CREATE INDEX pcts_by_user ON pcts (user_sub) WHERE user_sub IS NOT NULL;
CREATE INDEX pcts_by_expiry ON pcts (expires_at);
CREATE TABLE pct_claims (
    pct_digest  TEXT COLLATE "C" NOT NULL REFERENCES pcts (digest) ON DELETE CASCADE,
    type        TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    issuer      TEXT COLLATE "C" NOT NULL,
    subject     TEXT COLLATE "C",
    value       TEXT NOT NULL,
    client_id   TEXT COLLATE "C" NOT NULL,
    gathered_at BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (pct_digest, type, name, issuer)
);

UPDATE clients
SET metadata = jsonb_set(
    metadata::jsonb, '{grant_types}',
    (metadata::jsonb -> 'grant_types') || '"urn:ietf:params:oauth:grant-type:uma-ticket"'::jsonb
)::text
WHERE jsonb_typeof(metadata::jsonb -> 'grant_types') = 'array'
    AND coalesce(metadata::jsonb ->> 'token_endpoint_auth_method', '') != 'none'
    AND NOT (metadata::jsonb -> 'grant_types') ? 'urn:ietf:params:oauth:grant-type:uma-ticket';
