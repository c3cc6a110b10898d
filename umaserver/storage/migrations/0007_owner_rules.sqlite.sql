-- Version 7: owners' own rules, made on their policy pages, each the rule as a table of the rule
-- file in JSON (the rule file's reader checks it when it is used); and a version per owner, bumped
-- in the transaction of every change, which tells every process when to read an owner's rules again.
CREATE TABLE owner_rules (
    id         TEXT PRIMARY KEY,                   -- 'o-<random>': never one of the file's ids
    owner      TEXT NOT NULL REFERENCES users (sub) ON DELETE CASCADE,
    rule       TEXT NOT NULL,                      -- JSON object: the rule file's table
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX owner_rules_by_owner ON owner_rules (owner, created_at);
CREATE TABLE owner_rule_versions (
    owner   TEXT PRIMARY KEY REFERENCES users (sub) ON DELETE CASCADE,
    version INTEGER NOT NULL
);
