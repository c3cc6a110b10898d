-- Version 17 (SQLite's 0017 says what each column is for): notices, the pages' inbox and the
-- mail outbox.
CREATE TABLE notices (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id              TEXT COLLATE "C" PRIMARY KEY,
    user_sub        TEXT COLLATE "C" REFERENCES users (sub) ON DELETE CASCADE,
    address         TEXT,
    kind            TEXT NOT NULL,
    subject         TEXT NOT NULL,
    body            TEXT NOT NULL,
    link            TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    seen_at         BIGINT,
    mail_state      TEXT NOT NULL CHECK (mail_state IN ('none', 'pending', 'sent', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT,
    last_error      TEXT
);
CREATE INDEX notices_of_person ON notices (user_sub, created_at);
CREATE INDEX notices_unseen ON notices (user_sub) WHERE seen_at IS NULL;
CREATE INDEX notices_mail_due ON notices (next_attempt_at) WHERE mail_state = 'pending';
CREATE INDEX notices_by_time ON notices (created_at);
