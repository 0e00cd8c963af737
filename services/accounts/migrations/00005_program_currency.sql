-- +goose Up
-- A program's currency (of its fixed rewards and payouts) and its fixed
-- reward per settled lead, in major units of that currency. Existing
-- programs get the defaults: USD, and no lead reward.
-- The lead reward is exact like commission_rate (same numeric type); its
-- decimals must fit the currency (none for VND, cents for USD and EUR), as
-- the catalog checks before it writes. The same rule for a fixed
-- commission_rate is left to the catalog alone: programs stored before this
-- migration may hold a fixed rate of up to 4 decimals, and a constraint
-- would have to refuse them.
ALTER TABLE programs
    ADD COLUMN currency        text          NOT NULL DEFAULT 'USD' CHECK (currency IN ('USD', 'EUR', 'VND')),
    ADD COLUMN lead_commission numeric(12,4) NOT NULL DEFAULT 0 CHECK (lead_commission >= 0),
    ADD CONSTRAINT programs_lead_commission_decimals
        CHECK (lead_commission = round(lead_commission, CASE currency WHEN 'VND' THEN 0 ELSE 2 END));

-- +goose Down
SELECT 'forward-only';
