-- Version 12: the keys that sign JWT RPTs (issue 24, `[tokens] rpt_format = "jwt"`).
--
-- One row a key, by its kid (the RFC 7638 thumbprint of its public key): its algorithm (RS256 or
-- ES256), its public JWK (JSON; what /jwks publishes), its private key sealed with AES-GCM under a
-- key derived from secret_key (never in clear), when it was made, and whether it is the current
-- one, the key new RPTs are signed with. At most one is current (the partial unique index); the
-- others still verify until `keys retire` drops them.
CREATE TABLE signing_keys (
    kid          TEXT PRIMARY KEY,
    algorithm    TEXT NOT NULL,
    public_jwk   TEXT NOT NULL,
    sealed_key   TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    is_current   INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX signing_keys_one_current ON signing_keys (is_current) WHERE is_current;

-- Each grant of a JWT RPT reads the live permissions of one requesting party at one client
-- (`permissions_of_party`): found by both, not among every RPT of a client with many people.
CREATE INDEX rpts_by_party ON rpts (client_id, requesting_party);
