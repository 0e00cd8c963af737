-- +goose Up
-- The identity a user signs in with (issue 23): the OpenID provider's
-- issuer and subject, stored at the first sign-in and matched on
-- afterwards. An email address can change at the provider or pass to
-- someone else there; the subject never does. NULL for users who have not
-- signed in since (made by the admin API, or before this migration): their
-- next sign-in with a verified email binds them.
ALTER TABLE users ADD COLUMN oidc_issuer text, ADD COLUMN oidc_subject text,
    ADD CONSTRAINT users_oidc_identity_pair CHECK ((oidc_issuer IS NULL) = (oidc_subject IS NULL));
CREATE UNIQUE INDEX users_oidc_identity_key ON users (oidc_issuer, oidc_subject) WHERE oidc_subject IS NOT NULL;

-- +goose Down
DROP INDEX users_oidc_identity_key;
ALTER TABLE users DROP CONSTRAINT users_oidc_identity_pair, DROP COLUMN oidc_subject, DROP COLUMN oidc_issuer;
