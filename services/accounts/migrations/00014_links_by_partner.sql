-- +goose Up
-- The console's partners list reads the links of a page of partners
-- (partner_id = ANY($2) in the program); links' only index on the program
-- is (program_id, code), which cannot serve it.
CREATE INDEX links_program_partner ON links (program_id, partner_id);

-- +goose Down
DROP INDEX links_program_partner;
