-- Version 2: the database records its schema version; RPTs and assertion uses are found by expiry
-- (pruning them scanned the whole table inside the write transaction).
CREATE TABLE schema_migrations (
    version    INTEGER PRIMARY KEY,
    applied_at INTEGER NOT NULL
);
CREATE INDEX rpts_by_expiry ON rpts (expires_at);
CREATE INDEX seen_assertions_by_expiry ON seen_assertions (expires_at);
