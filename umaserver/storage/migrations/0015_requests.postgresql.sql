-- Version 15 (SQLite's 0015 says what each column is for): requests to owners.
CREATE TABLE requests (
    id              TEXT COLLATE "C" PRIMARY KEY,
    owner           TEXT COLLATE "C" NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    resource_set_id TEXT COLLATE "C" NOT NULL REFERENCES resource_sets (id) ON DELETE CASCADE,
    scopes          TEXT NOT NULL,
    party           TEXT COLLATE "C" NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    party_name      TEXT NOT NULL,
    client_id       TEXT COLLATE "C" NOT NULL,
    client_name     TEXT NOT NULL,
    ticket_digest   TEXT COLLATE "C" NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    decided_at      BIGINT,
    approved_scopes TEXT
);
CREATE INDEX requests_by_owner ON requests (owner, status, created_at);
CREATE INDEX requests_by_party ON requests (party, status);
CREATE INDEX requests_by_ticket ON requests (ticket_digest);
CREATE INDEX requests_by_expiry ON requests (expires_at);
CREATE INDEX requests_by_set ON requests (resource_set_id);
ALTER TABLE users ADD COLUMN takes_requests BOOLEAN;
-- A ticket that a request was filed with (1): only such a ticket's requests are looked up when
-- its client asks again, so that every other request for access reads nothing more.
ALTER TABLE tickets ADD COLUMN asked BOOLEAN NOT NULL DEFAULT FALSE;
