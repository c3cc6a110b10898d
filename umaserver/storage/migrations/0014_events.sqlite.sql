-- Version 14: the access history (issue 25): one row an event, written in the transaction of what
-- it records. An event keeps names as text, as they were then (the set's name, the client's name,
-- the requesting party's username), so that it still reads right after a set, a client or a person
-- is renamed or gone; nothing here refers to another table.
--
--   * `owner` is the resource set's owner (as resource_sets.owner), the key of an owner's history;
--   * `kind` is decision, grant, share, stop, approval, denial or revocation; `outcome` what came
--     of it (granted, refused, need_claims, revoked, ...); `decided_by` the rule or share that
--     decided, when one did;
--   * `scopes` is a JSON list; `requesting_party` NULL for a client acting for itself.
--
-- Pages read an owner's events newest first (owner, at); the maintenance job prunes by time (at).
CREATE TABLE events (
    at                INTEGER NOT NULL,
    owner             TEXT NOT NULL,
    resource_set_id   TEXT NOT NULL,
    resource_set_name TEXT NOT NULL,
    scopes            TEXT NOT NULL,
    client_id         TEXT NOT NULL,
    client_name       TEXT NOT NULL,
    requesting_party  TEXT,
    kind              TEXT NOT NULL,
    outcome           TEXT NOT NULL,
    decided_by        TEXT
);
CREATE INDEX events_by_owner ON events (owner, at);
CREATE INDEX events_by_time ON events (at);
