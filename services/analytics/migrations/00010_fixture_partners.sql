-- +goose Up
-- The `svc test` fixture partner of a program (accounts makes it for the
-- CLI's test events, with the address test-partner+<program id>@svc.invalid:
-- proto Partner.email) is no partner of the program's: status's hasPartners
-- and performance's partners leave it out, as the CLI's status does
-- (issue 23). The replica keeps which program a partner is the fixture of,
-- never the address.
ALTER TABLE partners ADD COLUMN fixture_program_id bigint;

-- Fixture partners replicated before: the replica never kept their
-- address, so they are known by the fixed name accounts gives them
-- ("svc test partner") and their enrolment.
UPDATE partners p SET fixture_program_id = pp.program_id
FROM partner_programs pp
WHERE p.name = 'svc test partner' AND pp.partner_id = p.id;

-- +goose Down
ALTER TABLE partners DROP COLUMN fixture_program_id;
