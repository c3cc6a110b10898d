-- Version 17: notices (issue 25, item 4): what the server tells a person (a share made with
-- them, a request to the owner, the owner's decision, an invitation), both the person's inbox on
-- the pages (`/notices`) and the outbox of the mail sender, written in the transaction of what
-- it tells of (so that a notice exists exactly when that happened).
--
--   * `id` is random; `user_sub` the person it is for (NULL for a bare address: an invitation),
--     deleted with the person; `address` where it is mailed (NULL when no verified address is
--     known);
--   * `kind` is share, request, approved, denied or invitation; `subject`, `body` (plain text)
--     and `link` (an absolute URL on this server) are the words as written then;
--   * `seen_at` when the person saw it on the pages (NULL: unseen);
--   * `mail_state`: none (not to be mailed), pending, sent or failed; `attempts` the tries so
--     far, `next_attempt_at` when it is due next (a sender claims it by moving this forward, so
--     that another process does not take it meanwhile), `last_error` why the last try failed.
CREATE TABLE notices (
    id              TEXT PRIMARY KEY,
    user_sub        TEXT REFERENCES users (sub) ON DELETE CASCADE,
    address         TEXT,
    kind            TEXT NOT NULL,
    subject         TEXT NOT NULL,
    body            TEXT NOT NULL,
    link            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    seen_at         INTEGER,
    mail_state      TEXT NOT NULL CHECK (mail_state IN ('none', 'pending', 'sent', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    last_error      TEXT
);
-- A person's notices newest first (the page); their unseen count (the header, on every page).
CREATE INDEX notices_of_person ON notices (user_sub, created_at);
CREATE INDEX notices_unseen ON notices (user_sub) WHERE seen_at IS NULL;
-- The mail due now (the sender, every few seconds); old notices (the maintenance job).
CREATE INDEX notices_mail_due ON notices (next_attempt_at) WHERE mail_state = 'pending';
CREATE INDEX notices_by_time ON notices (created_at);
