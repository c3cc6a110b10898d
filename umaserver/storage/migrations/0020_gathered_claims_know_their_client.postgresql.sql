-- Version 20 (SQLite's 0020 says why): a gathered claim's client joins its primary key, and each
-- client's requests with a ticket are counted apart.
ALTER TABLE gathered_claims DROP CONSTRAINT gathered_claims_pkey;
ALTER TABLE gathered_claims
    ADD PRIMARY KEY (ticket_digest, requesting_party, type, name, issuer, client_id);
CREATE TABLE ticket_requests (
    ticket_digest TEXT COLLATE "C" NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    client_id     TEXT COLLATE "C" NOT NULL,
    requests      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (ticket_digest, client_id)
);
