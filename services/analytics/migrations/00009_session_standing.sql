-- +goose Up
-- What analytics needs to refuse a dashboard session that no longer
-- stands (issue 23): session tokens are verified without calling accounts,
-- so the catalog topic brings the users' suspensions (catalog.user.upserted)
-- and the sessions signed out before their expiry
-- (catalog.session.revoked). A revocation is kept until a minute past its
-- token's expiry; later revocations sweep older ones.
CREATE TABLE users (
    id          bigint  PRIMARY KEY,
    blocked     boolean NOT NULL,
    catalog_seq bigint  NOT NULL
);

CREATE TABLE session_revocations (
    session_id  text        PRIMARY KEY,
    user_id     bigint      NOT NULL,
    expires_at  timestamptz NOT NULL,
    catalog_seq bigint      NOT NULL
);
CREATE INDEX session_revocations_expires_idx ON session_revocations (expires_at);

-- +goose Down
DROP TABLE session_revocations;
DROP TABLE users;
