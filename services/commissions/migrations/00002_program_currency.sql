-- +goose Up
-- The program's currency (of its fixed rewards and payouts) and its fixed
-- reward per settled lead, as accounts sends them (catalog Program fields 17
-- and 18). Rows written from events published before accounts had them get
-- what such events mean: USD and no lead reward ("0"); the consumer maps
-- empty fields of an older event the same way.
ALTER TABLE programs
    ADD COLUMN currency        text NOT NULL DEFAULT 'USD',
    -- A decimal string in major units of currency, like commission_rate.
    ADD COLUMN lead_commission text NOT NULL DEFAULT '0';

-- +goose Down
SELECT 'forward-only';
