-- Version 3: a gathered claim keeps whom it is about at its issuer (`subject`: an ID token's sub, an
-- assertion's NameID), and a re-push replaces a claim of the same type and name only from the same
-- issuer. Rows gathered before keep their values, with no subject (NULL).
CREATE TABLE gathered_claims_v3 (
    ticket_digest    TEXT NOT NULL REFERENCES tickets (digest) ON DELETE CASCADE,
    requesting_party TEXT NOT NULL,
    type             TEXT NOT NULL,
    name             TEXT NOT NULL,
    issuer           TEXT NOT NULL,
    subject          TEXT,
    value            TEXT NOT NULL,
    client_id        TEXT NOT NULL,
    gathered_at      INTEGER NOT NULL,
    PRIMARY KEY (ticket_digest, requesting_party, type, name, issuer)
);
INSERT INTO gathered_claims_v3 (ticket_digest, requesting_party, type, name, issuer, subject, value,
    client_id, gathered_at)
SELECT ticket_digest, requesting_party, type, name, issuer, NULL, value, client_id, gathered_at
FROM gathered_claims;
DROP TABLE gathered_claims;
ALTER TABLE gathered_claims_v3 RENAME TO gathered_claims;
