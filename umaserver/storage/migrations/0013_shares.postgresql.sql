-- Version 13 (SQLite's 0013 says what each column is for): shares, each marking an owner's rule.
CREATE TABLE shares (
    rule_id         TEXT COLLATE "C" PRIMARY KEY REFERENCES owner_rules (id) ON DELETE CASCADE,
    owner           TEXT COLLATE "C" NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    resource_set_id TEXT COLLATE "C" NOT NULL,
    recipient       TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('user', 'email')),
    scopes          TEXT NOT NULL,
    until           BIGINT,
    created_at      BIGINT NOT NULL
);
CREATE INDEX shares_by_set ON shares (owner, resource_set_id, created_at);
