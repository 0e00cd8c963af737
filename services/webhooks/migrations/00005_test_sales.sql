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

-- +goose Down
SELECT 'forward-only';
