-- Version 19 (SQLite's 0019 says what the column is for): who queued each fetched URI first.
ALTER TABLE fetched_uris ADD COLUMN queued_by TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX fetched_uris_by_queuer ON fetched_uris (queued_by, next_try_at, id);
CREATE INDEX fetched_uris_by_queuer_served ON fetched_uris (queued_by, checked_at);
CREATE INDEX fetched_uris_by_lease ON fetched_uris (claimed_until);
