-- +goose Up
-- A link code is one program's (issue: one brand could register another
-- brand's code and take its clicks, since tracking resolves a click sent
-- without program_id by the code alone). Creating a link checks the code
-- across programs (catalog's claimCode); this index serves that check.
-- Not unique: codes two programs already share stay as they are (tracking
-- resolves those as before: the active link, then the oldest).
CREATE INDEX IF NOT EXISTS links_code ON links (code);

-- +goose Down
DROP INDEX IF EXISTS links_code;
