-- +goose Up
-- The ledger's test-mode sales (ids), from its sale events. The ledger's
-- refund event does not say whether the sale refunded was a test sale, and
-- a test sale's sale.refunded must go only to endpoints with include_test
-- as its sale.created did: the events consumer keeps each test sale's id
-- here and looks a refund's sale up. Test sales only, so the table stays
-- small; the ledger's topic is kept for ever and read from its start, so
-- it holds every test sale.
CREATE TABLE test_sales (
    sale_id bigint PRIMARY KEY
);

-- The programs' `svc test` fixture partners (accounts makes one per
-- program, test-partner+<program id>@svc.invalid, and enrols it), from the
-- catalog's partner events: their enrolment is a test partner.enrolled,
-- delivered only to endpoints with include_test.
CREATE TABLE fixture_partners (
    partner_id bigint NOT NULL,
    program_id bigint NOT NULL,
    PRIMARY KEY (partner_id, program_id)
);

-- +goose Down
SELECT 'forward-only';
