-- Version 16 (SQLite's 0016 says what each column is for): invitations to a share by e-mail.
CREATE TABLE invitations (
    digest     TEXT COLLATE "C" PRIMARY KEY,
    rule_id    TEXT COLLATE "C" NOT NULL UNIQUE REFERENCES shares (rule_id) ON DELETE CASCADE,
    owner      TEXT COLLATE "C" NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    address    TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT,
    used_by    TEXT COLLATE "C" REFERENCES users (sub) ON DELETE SET NULL
);
CREATE INDEX invitations_by_owner ON invitations (owner, created_at);
CREATE INDEX invitations_by_expiry ON invitations (expires_at);
CREATE INDEX invitations_by_use ON invitations (used_at);
CREATE INDEX invitations_by_user ON invitations (used_by);
