-- Version 20: claims gathered for a ticket serve only the client that gathered them (issue 27,
-- N1). `client_id` has been on every gathered claim since version 1 (the client that pushed it,
-- or the client the person agreed with on the redirect profile's or the claims interaction
-- endpoint's page), but the primary key left it out: the claims of two clients about one party
-- on one ticket replaced each other and were read together. It joins the key (last, so the
-- lookups by ticket and party keep their index); every row keeps the client it was written with,
-- and serves only that client from now on.
CREATE TABLE gathered_claims_v20 (
    ticket_digest    TEXT NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    requesting_party TEXT NOT NULL,
    type             TEXT NOT NULL,
    name             TEXT NOT NULL,
    issuer           TEXT NOT NULL,
    subject          TEXT,
    value            TEXT NOT NULL,
    client_id        TEXT NOT NULL,
    gathered_at      INTEGER NOT NULL,
    expires_at       INTEGER,
    PRIMARY KEY (ticket_digest, requesting_party, type, name, issuer, client_id)
);
INSERT INTO gathered_claims_v20 (ticket_digest, requesting_party, type, name, issuer, subject,
    value, client_id, gathered_at, expires_at)
SELECT ticket_digest, requesting_party, type, name, issuer, subject, value, client_id,
    gathered_at, expires_at
FROM gathered_claims;
DROP TABLE gathered_claims;
ALTER TABLE gathered_claims_v20 RENAME TO gathered_claims;

-- How many authorization requests each client made with a ticket: a client has its own 10
-- (`pushed_claims.MAX_TICKET_REQUESTS`), and another client's requests spend none of them.
-- `tickets.requests` goes on counting every client's, for the record. Counts made before this
-- version are not split by client (they are not known to be anyone's): a ticket open at the
-- upgrade (it lives minutes) gives each client its 10 from here.
CREATE TABLE ticket_requests (
    ticket_digest TEXT NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    client_id     TEXT NOT NULL,
    requests      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (ticket_digest, client_id)
);
