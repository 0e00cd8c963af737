-- +goose Up
-- Dashboard sessions signed out before their expiry (issue 23). A session
-- token is signed, not stored, so this list is what makes a signed-out
-- token stop working; each row is also published on the catalog topic
-- (catalog.session.revoked) for the other services' replicas. A row is
-- useless once its token has expired (expires_at): sign-outs sweep those.
CREATE TABLE session_revocations (
    session_id text        PRIMARY KEY,
    user_id    bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz NOT NULL
);
CREATE INDEX session_revocations_expires_idx ON session_revocations (expires_at);

-- +goose Down
DROP TABLE session_revocations;
