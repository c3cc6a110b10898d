-- Version 6: identities at external OpenID Connect providers (issuer, subject) linked to local
-- users, so that signing in there signs the user in here. An identity is linked to one user at most.
CREATE TABLE identity_links (
    issuer    TEXT NOT NULL,
    subject   TEXT NOT NULL,
    user_sub  TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    linked_at INTEGER NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX identity_links_by_user ON identity_links (user_sub);
