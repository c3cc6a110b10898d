-- Version 10: SQLite gains the indexes PostgreSQL's schema had from its start, but one: PostgreSQL's
-- (owner, name, id) of resource sets, which would cost every create and update of a set 6% here,
-- for the policy pages of owners of thousands of sets.
-- PostgreSQL has them all, so it has no file for this version: it records version 10 as it is.
--
-- Every column that points at a row of another table leads an index. Without them, deleting a
-- client (its own DELETE at /register/<id>, or `client delete`) read eight whole tables to find
-- what pointed at it, all under the database's one write lock: 220 ms with 10^6 resource sets,
-- 2 * 10^5 access tokens and 10^5 tickets, during which no other request could write. Deleting a
-- user read the refresh tokens and authorization codes, and replacing a fetched image read every
-- fetched URI.
CREATE INDEX access_tokens_by_client ON access_tokens (client_id);
CREATE INDEX resource_sets_by_client ON resource_sets (client_id);
CREATE INDEX tickets_by_client ON tickets (client_id);
CREATE INDEX rpts_by_client ON rpts (client_id);
CREATE INDEX claims_handles_by_client ON claims_handles (client_id);
CREATE INDEX authorization_codes_by_client ON authorization_codes (client_id);
CREATE INDEX authorization_codes_by_user ON authorization_codes (user_sub);
CREATE INDEX refresh_tokens_by_client ON refresh_tokens (client_id);
CREATE INDEX refresh_tokens_by_user ON refresh_tokens (user_sub);
CREATE INDEX consents_by_client ON consents (client_id);
CREATE INDEX fetched_uris_by_image ON fetched_uris (image_id);
-- Forgetting old failed sign-ins finds them without reading every failure kept.
CREATE INDEX signin_failures_by_time ON signin_failures (failed_at);
