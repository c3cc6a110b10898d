-- Version 16: invitations (issue 25, item 2). Sharing with an e-mail address that no local user
-- has makes one single-use link, {issuer}/invitations/{token}; the first account that accepts it
-- becomes the share's recipient.
--
-- One row an invitation: `digest` the SHA-256 of the link's token (never the token itself), the
-- share it belongs to (`rule_id`, the share's rule: stopping the share deletes its invitation),
-- the owner (a user's sub), `address` the e-mail address shared with, as the owner typed it; when
-- it was made and until when it may be used; `used_at` and `used_by` (the accepting user's sub)
-- once accepted, NULL before. A share has at most one invitation ("New link" replaces the
-- digest). The maintenance job prunes rows expired or used more than a day ago (the link then
-- reads as unknown).
CREATE TABLE invitations (
    digest     TEXT PRIMARY KEY,
    rule_id    TEXT NOT NULL UNIQUE REFERENCES shares (rule_id) ON DELETE CASCADE,
    owner      TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    address    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER,
    used_by    TEXT REFERENCES users (sub) ON DELETE SET NULL
);
-- A set's page lists the owner's pending invitations; pruning goes by expiry and by use; deleting a
-- user finds the invitations it accepted by used_by.
CREATE INDEX invitations_by_owner ON invitations (owner, created_at);
CREATE INDEX invitations_by_expiry ON invitations (expires_at);
CREATE INDEX invitations_by_use ON invitations (used_at);
CREATE INDEX invitations_by_user ON invitations (used_by);
