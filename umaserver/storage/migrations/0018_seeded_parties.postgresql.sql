-- Version 18 (SQLite's 0018 says what each column is for): the parties a seed file created.
CREATE TABLE seeded_parties (
    seq       BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    kind      TEXT COLLATE "C" NOT NULL CHECK (kind IN ('user', 'client', 'link')),
    party     TEXT COLLATE "C" NOT NULL,
    subject   TEXT COLLATE "C" NOT NULL DEFAULT '',
    seeded_at BIGINT NOT NULL,
    PRIMARY KEY (kind, party, subject)
);
