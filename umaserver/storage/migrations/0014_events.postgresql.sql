-- Version 14 (SQLite's 0014 says what each column is for): the access history.
CREATE TABLE events (
    seq               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at                BIGINT NOT NULL,
    owner             TEXT COLLATE "C" NOT NULL,
    resource_set_id   TEXT COLLATE "C" NOT NULL,
    resource_set_name TEXT NOT NULL,
    scopes            TEXT NOT NULL,
    client_id         TEXT COLLATE "C" NOT NULL,
    client_name       TEXT NOT NULL,
    requesting_party  TEXT,
    kind              TEXT NOT NULL,
    outcome           TEXT NOT NULL,
    decided_by        TEXT
);
CREATE INDEX events_by_owner ON events (owner, at);
CREATE INDEX events_by_time ON events (at);
