-- Version 9 (SQLite's 0009 too): the access token indexes by family (the code grant a token came
-- from) and by user hold only tokens that have one. A client_credentials token has neither: each
-- one written to them cost two index entries per token issued, for lookups (a family's revocation,
-- a user's deletion) that never ask for NULL.
DROP INDEX access_tokens_by_family;
CREATE INDEX access_tokens_by_family ON access_tokens (family) WHERE family IS NOT NULL;
DROP INDEX access_tokens_by_user;
CREATE INDEX access_tokens_by_user ON access_tokens (user_sub) WHERE user_sub IS NOT NULL;
