-- +goose Up
-- Flat cost at any size (issue 20): every statement of the click, lead,
-- visit, config and attribution paths is served by an index whose leading
-- columns its predicate fixes already (the plan test, deploy/devstack/plans,
-- checks it on 100,000-row tables); what this adds is room for HOT updates.
--
-- An UPDATE that changes no indexed column (key or partial-index
-- predicate) writes no index entries when the new row version fits on its
-- page. These do:
--   customers: a sale's conversion (status, first_purchase_date,
--     sale_recorded_at; the processor customer id only when it was unset);
--   lead_events: a provisional lead settling;
--   link_stats, partner_program_metrics: every counter fold and settled
--     lead (a few rows updated all day long).
-- A lower fillfactor leaves that room on new pages. Setting it rewrites
-- nothing and does not block reads or writes (SHARE UPDATE EXCLUSIVE).
ALTER TABLE customers SET (fillfactor = 90);
ALTER TABLE lead_events SET (fillfactor = 90);
ALTER TABLE link_stats SET (fillfactor = 70);
ALTER TABLE partner_program_metrics SET (fillfactor = 70);

-- +goose Down
SELECT 'forward-only';
