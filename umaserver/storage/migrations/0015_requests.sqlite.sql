-- Version 15: requests to owners (issue 25, item 3). A client acting for a person asks the owner
-- when the rules refuse (`submit_request`); the owner approves (a share) or denies on
-- /policy/requests.
--
-- One row a request: `id` random, `owner` the set's owner (a user's sub; deleting the owner or the
-- set deletes the request), `scopes` the scopes asked (JSON array), `party` the requesting party
-- (a user's sub; deleting the person deletes the request) and `party_name` their username as it
-- was, the client's id and name as they were, `ticket_digest` the digest of the ticket the
-- client polls with (UMA 2.0 rotates it: the row follows), `status` pending, approved, denied or
-- expired, `expires_at` the end of the wait for the owner (the ticket lives as long), `decided_at`
-- when the owner answered, `approved_scopes` (JSON array) what an approval gave.
CREATE TABLE requests (
    id              TEXT PRIMARY KEY,
    owner           TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    resource_set_id TEXT NOT NULL REFERENCES resource_sets (id) ON DELETE CASCADE,
    scopes          TEXT NOT NULL,
    party           TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    party_name      TEXT NOT NULL,
    client_id       TEXT NOT NULL,
    client_name     TEXT NOT NULL,
    ticket_digest   TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    decided_at      INTEGER,
    approved_scopes TEXT
);
-- The owner's list by status, newest first; a party's pending count; the ticket's request;
-- pruning; and deleting a set finds its requests.
CREATE INDEX requests_by_owner ON requests (owner, status, created_at);
CREATE INDEX requests_by_party ON requests (party, status);
CREATE INDEX requests_by_ticket ON requests (ticket_digest);
CREATE INDEX requests_by_expiry ON requests (expires_at);
CREATE INDEX requests_by_set ON requests (resource_set_id);
-- Whether others may ask this owner: 1 yes, 0 no, NULL the server's default ([sharing] requests).
ALTER TABLE users ADD COLUMN takes_requests INTEGER;
-- A ticket that a request was filed with (1): only such a ticket's requests are looked up when
-- its client asks again, so that every other request for access reads nothing more.
ALTER TABLE tickets ADD COLUMN asked INTEGER NOT NULL DEFAULT 0;
