-- +goose Up
-- The console's partners list asks for the figures of a page of partners
-- (internal/partnerfigures): partner_id = ANY($2) within a window. The
-- primary keys lead with (program_id, bucket), so each read walked every
-- bucket of the program in the window; these serve it by partner.
CREATE INDEX partner_buckets_partner ON partner_buckets (program_id, partner_id, bucket);
CREATE INDEX partner_money_partner ON partner_money (program_id, partner_id, bucket);

-- +goose Down
DROP INDEX partner_money_partner;
DROP INDEX partner_buckets_partner;
