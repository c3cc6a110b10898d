-- Version 8: what registrations point at, checked in the background (issue 12). `fetched_uris` is
-- both the queue and the cache: one row per (uri, kind) (kind: scope description, image, web
-- page), due for a fetch when `next_try_at` has come and no process holds it (`claimed_until`, a
-- lease taken in a write transaction). `status`: pending (never fetched yet), checked (the result
-- columns hold what was found, until `expires_at`) or failed (`failures` in a row; `reason` says
-- why). Images that passed the check are kept in `fetched_images` and served by this server.
CREATE TABLE fetched_images (
    id           TEXT PRIMARY KEY,
    content_type TEXT NOT NULL
        CHECK (content_type IN ('image/png', 'image/jpeg', 'image/gif', 'image/webp')),
    bytes        BLOB NOT NULL,
    size         INTEGER NOT NULL,
    fetched_at   INTEGER NOT NULL
);
CREATE TABLE fetched_uris (
    id            TEXT PRIMARY KEY,
    uri           TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('scope', 'image', 'page')),
    status        TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'checked', 'failed')),
    name          TEXT,
    icon_uri      TEXT,
    content_type  TEXT,
    image_id      TEXT REFERENCES fetched_images (id) ON DELETE SET NULL,
    reason        TEXT,
    created_at    INTEGER NOT NULL,
    checked_at    INTEGER,
    expires_at    INTEGER,
    failures      INTEGER NOT NULL DEFAULT 0,
    next_try_at   INTEGER NOT NULL,
    claimed_until INTEGER NOT NULL DEFAULT 0,
    UNIQUE (uri, kind)
);
CREATE INDEX fetched_uris_by_next_try ON fetched_uris (next_try_at);
