-- Version 11: UMA 2.0 beside 1.0 on one store (issue 23).
--
-- A ticket may request several (resource set, scopes) pairs of one owner. Its first pair stays in
-- its own row (resource_set_id, scopes: one write for the common ticket of one pair); the others
-- are ticket_resources, in order (position 1, 2, ...). A 2.0 ticket records its requesting party:
-- client:<client_id> until a person shares claims at the claims interaction endpoint, then that
-- person; NULL on a 1.0 ticket, whose party is its AAT's.
ALTER TABLE tickets ADD COLUMN requesting_party TEXT;
-- How many pairs the ticket asks for: a deleted set takes its ticket_resources row away (ON DELETE
-- CASCADE), and a ticket that reads fewer pairs than it asked for has ended.
ALTER TABLE tickets ADD COLUMN pairs INTEGER NOT NULL DEFAULT 1;
-- A gathered claim keeps when the word it rests on ends (an ID token's or assertion's expiry): a
-- PCT made of it keeps it no longer. NULL: no end of its own (a client's plain word, a person's
-- attributes).
ALTER TABLE gathered_claims ADD COLUMN expires_at INTEGER;
CREATE TABLE ticket_resources (
    ticket_digest   TEXT NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    position        INTEGER NOT NULL,
    resource_set_id TEXT NOT NULL REFERENCES resource_sets (id) ON DELETE CASCADE,
    scopes          TEXT NOT NULL,                 -- JSON array
    PRIMARY KEY (ticket_digest, position)
);
CREATE INDEX ticket_resources_by_resource_set ON ticket_resources (resource_set_id);

-- An RPT of the 2.0 grant belongs to its client, with no AAT: aat_digest becomes nullable (SQLite
-- rebuilds the table for it; the permissions that point at it are kept).
CREATE TABLE rpts_v11 (
    digest           TEXT PRIMARY KEY,
    seed             TEXT NOT NULL,
    aat_digest       TEXT REFERENCES access_tokens (digest) ON DELETE CASCADE,
    client_id        TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    requesting_party TEXT NOT NULL,
    issued_at        INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    revoked          INTEGER NOT NULL DEFAULT 0
);
INSERT INTO rpts_v11 (digest, seed, aat_digest, client_id, requesting_party, issued_at, expires_at,
    revoked)
SELECT digest, seed, aat_digest, client_id, requesting_party, issued_at, expires_at, revoked
FROM rpts;
DROP TABLE rpts;
ALTER TABLE rpts_v11 RENAME TO rpts;
CREATE INDEX rpts_by_aat ON rpts (aat_digest, revoked);
CREATE INDEX rpts_by_expiry ON rpts (expires_at);
CREATE INDEX rpts_by_client ON rpts (client_id);

-- A persisted claims token (PCT): the claims a ticket held when it was granted, kept for later
-- tickets of the same client (`[lifetimes] pct`). user_sub: the person they are about, when a
-- person shared them (the PCT goes when the person does); requesting_party as on the ticket.
-- Each claim keeps its provenance and its own expiry (an ID token's or assertion's, else the
-- PCT's).
CREATE TABLE pcts (
    digest           TEXT PRIMARY KEY,
    client_id        TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    requesting_party TEXT NOT NULL,
    user_sub         TEXT REFERENCES users (sub) ON DELETE CASCADE,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    revoked          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX pcts_by_client ON pcts (client_id);
CREATE INDEX pcts_by_user ON pcts (user_sub) WHERE user_sub IS NOT NULL;
CREATE INDEX pcts_by_expiry ON pcts (expires_at);
CREATE TABLE pct_claims (
    pct_digest  TEXT NOT NULL REFERENCES pcts (digest) ON DELETE CASCADE,
    type        TEXT NOT NULL,
    name        TEXT NOT NULL,
    issuer      TEXT NOT NULL,
    subject     TEXT,
    value       TEXT NOT NULL,                     -- JSON
    client_id   TEXT NOT NULL,
    gathered_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (pct_digest, type, name, issuer)
);

-- The uma-ticket grant: confidential clients registered with a list of grant types gain it, as
-- clients made without one do by default.
UPDATE clients
SET metadata = json_insert(metadata, '$.grant_types[#]', 'urn:ietf:params:oauth:grant-type:uma-ticket')
WHERE json_type(metadata, '$.grant_types') = 'array'
    AND coalesce(json_extract(metadata, '$.token_endpoint_auth_method'), '') != 'none'
    AND NOT EXISTS (
        SELECT 1 FROM json_each(metadata, '$.grant_types')
        WHERE value = 'urn:ietf:params:oauth:grant-type:uma-ticket'
    );
