-- Version 19: the fetch queue takes due URIs fairly across registrations (issue 27, N5): each row
-- of `fetched_uris` names who queued it first, `queued_by`: `set:<resource set id>` for a resource
-- set's scopes and icon (and the icons their scope descriptions name), `client:<client_id>` for a
-- registered client's logo and page, '' for a URI a page asked about and for rows queued before
-- this version. The job takes due rows round-robin by it, so one registration's many URIs that
-- never answer cannot hold another's back. The indexes serve the claim's look-ups: each queuer's
-- longest due row, when it was last served, and how many of its rows are leased now.
ALTER TABLE fetched_uris ADD COLUMN queued_by TEXT NOT NULL DEFAULT '';
CREATE INDEX fetched_uris_by_queuer ON fetched_uris (queued_by, next_try_at, id);
CREATE INDEX fetched_uris_by_queuer_served ON fetched_uris (queued_by, checked_at);
CREATE INDEX fetched_uris_by_lease ON fetched_uris (claimed_until);
