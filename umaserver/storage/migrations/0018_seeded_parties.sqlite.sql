-- Version 18: the parties a seed file created (`umaserver seed apply`), so that `seed apply
-- --prune` removes only those that an earlier apply created and the file no longer lists, never
-- a party made by hand, at /register or on the pages.
--
--   * `kind` is user, client or link;
--   * `party` names it: a user's sub (not the username: a user deleted by hand and made again
--     under the same name is not the seed's), a client's client_id, a link's issuer;
--   * `subject` is a link's subject at its issuer ('' for a user or a client);
--   * `seeded_at` is when the apply that created it ran.
-- No foreign keys: a row outlives its party when that is deleted another way, and the next
-- `--prune` forgets it.
CREATE TABLE seeded_parties (
    kind      TEXT NOT NULL CHECK (kind IN ('user', 'client', 'link')),
    party     TEXT NOT NULL,
    subject   TEXT NOT NULL DEFAULT '',
    seeded_at INTEGER NOT NULL,
    PRIMARY KEY (kind, party, subject)
);
