-- Version 5: the redirect claims profile. A claims handle is the `value` of a `redirect_required`
-- entry (stored as its SHA-256 digest): bound to the ticket, the client and the requesting party
-- of the AAT it was made for, and, once the person arrives at /rqp_claims, to that browser
-- (`binding_digest`). `state`: open, used (the gathering finished) or void (a later request on the
-- ticket replaced it).
CREATE TABLE claims_handles (
    digest           TEXT PRIMARY KEY,
    ticket_digest    TEXT NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    client_id        TEXT NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
    requesting_party TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    binding_digest   TEXT,
    state            TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'used', 'void'))
);
CREATE INDEX claims_handles_by_ticket ON claims_handles (ticket_digest);
CREATE INDEX claims_handles_by_expiry ON claims_handles (expires_at);
