-- +goose Up
-- What program_money (00010) must hold, summed from the rows its triggers
-- follow: credited commissions net of refunds, a program's paid and open
-- payouts. For a reconciliation (`SELECT … FROM program_money FULL JOIN
-- program_money_from_rows …` names any drift), for a bulk load that runs
-- with triggers off, and for the ledger tests' check after each test.
-- Never read on a request path: it sums whole tables (a WHERE on
-- program_id is pushed down to both branches).
CREATE VIEW program_money_from_rows AS
SELECT program_id, partner_id, currency, sum(earned)::bigint AS earned, sum(paid)::bigint AS paid, sum(open)::bigint AS open
FROM (
    SELECT program_id, partner_id, currency, amount - refunded_amount AS earned, 0 AS paid, 0 AS open
    FROM commissions WHERE credited
    UNION ALL
    SELECT program_id, partner_id, currency, 0,
        CASE WHEN status = 'paid' THEN amount ELSE 0 END, CASE WHEN status = 'open' THEN amount ELSE 0 END
    FROM withdrawals WHERE program_id IS NOT NULL
) t
GROUP BY program_id, partner_id, currency;

-- +goose Down
DROP VIEW program_money_from_rows;
