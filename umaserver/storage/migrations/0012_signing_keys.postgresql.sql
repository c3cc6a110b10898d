-- Version 12 (SQLite's 0012 says what each column is for): the keys that sign JWT RPTs.
CREATE TABLE signing_keys (
    kid          TEXT COLLATE "C" PRIMARY KEY,
    algorithm    TEXT NOT NULL,
    public_jwk   TEXT NOT NULL,
    sealed_key   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    is_current   BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE UNIQUE INDEX signing_keys_one_current ON signing_keys (is_current) WHERE is_current;
CREATE INDEX rpts_by_party ON rpts (client_id, requesting_party);
