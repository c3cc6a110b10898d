-- Version 13: shares (issue 25). A share is an owner's rule underneath (one engine, one
-- explanation); its row here marks that rule as a share and keeps what the owner typed.
--
-- One row a share, by the id of its rule (deleting the rule, or the owner, deletes the share):
-- the owner (a user's sub), the set shared, `recipient` the username or e-mail address exactly as
-- registered, `kind` which of the two it is, the scopes shared (JSON array of strings), `until`
-- the end of the share (epoch seconds, the end of a day UTC; NULL: no end), and when it was made.
CREATE TABLE shares (
    rule_id         TEXT PRIMARY KEY REFERENCES owner_rules (id) ON DELETE CASCADE,
    owner           TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    resource_set_id TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('user', 'email')),
    scopes          TEXT NOT NULL,
    until           INTEGER,
    created_at      INTEGER NOT NULL
);
-- A set's page lists its shares; the limit counts an owner's.
CREATE INDEX shares_by_set ON shares (owner, resource_set_id, created_at);
