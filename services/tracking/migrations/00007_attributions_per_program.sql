-- +goose Up
-- Only decisions that attribute a payment are kept, and each is keyed by
-- its program: a refused payment records nothing a later request can trip
-- over (the spec's Track sale rule 2: the next payment is checked again),
-- and one program's request is never answered with another program's
-- decision. A refusal left by an older release would still be replayed:
-- they are dropped here.
DELETE FROM attributions WHERE outcome <> 'attributed';
ALTER TABLE attributions DROP CONSTRAINT attributions_pkey;
ALTER TABLE attributions ADD PRIMARY KEY (program_id, transaction_id);
ALTER TABLE attributions ADD CONSTRAINT attributions_attributed_only CHECK (outcome = 'attributed');

-- +goose Down
ALTER TABLE attributions DROP CONSTRAINT attributions_attributed_only;
ALTER TABLE attributions DROP CONSTRAINT attributions_pkey;
ALTER TABLE attributions ADD PRIMARY KEY (transaction_id);
