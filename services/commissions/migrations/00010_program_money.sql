-- +goose Up
-- Running totals of each partner's money per program and currency (issue
-- 21: the payouts list at 10,000 partners and 1,000,000 commissions). The
-- list and a payout's cap read one row per partner instead of summing the
-- partner's commissions and payouts on every request, so their cost does
-- not grow with the commissions a partner earned.
--
-- earned: the net (amount - refunded_amount) of the partner's credited
-- commissions in the program; paid and open: the program's paid and open
-- payouts (withdrawals with a program_id; the admin API's withdrawals of a
-- partner as a whole belong to no program and are not here).
--
-- Kept by triggers, not by the ledger's Go code: every statement that
-- changes a commission or a withdrawal (the sale, refund, approval,
-- reversal and payout paths, the backstop, a future one) moves the totals
-- in its own transaction, and none can forget to. Every such change is made
-- while the transaction holds the partner's balance row (PostEntry or
-- LockBalance comes first in each use case), so these row locks are always
-- taken after it and add no new lock order. The functions keep the
-- migration's search_path, so a session on another path (a bulk load, an
-- operator's psql) moves the same table.
CREATE TABLE program_money (
    program_id bigint NOT NULL,
    partner_id bigint NOT NULL,
    currency   text   NOT NULL,
    earned     bigint NOT NULL DEFAULT 0,
    paid       bigint NOT NULL DEFAULT 0,
    open       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (program_id, partner_id, currency)
);

-- +goose StatementBegin
CREATE FUNCTION program_money_move(p bigint, pa bigint, cur text, d_earned bigint, d_paid bigint, d_open bigint) RETURNS void
LANGUAGE sql SET search_path FROM CURRENT AS $$
    INSERT INTO program_money AS m (program_id, partner_id, currency, earned, paid, open)
    VALUES (p, pa, cur, d_earned, d_paid, d_open)
    ON CONFLICT (program_id, partner_id, currency) DO UPDATE
    SET earned = m.earned + EXCLUDED.earned, paid = m.paid + EXCLUDED.paid, open = m.open + EXCLUDED.open
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION program_money_commission() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    -- A commission keeps its program, partner and currency for life; its
    -- credited state and refunds are what move.
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.credited THEN
        PERFORM program_money_move(OLD.program_id, OLD.partner_id, OLD.currency, -(OLD.amount - OLD.refunded_amount), 0, 0);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.credited THEN
        PERFORM program_money_move(NEW.program_id, NEW.partner_id, NEW.currency, NEW.amount - NEW.refunded_amount, 0, 0);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION program_money_withdrawal() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.program_id IS NOT NULL AND OLD.status IN ('paid', 'open') THEN
        PERFORM program_money_move(OLD.program_id, OLD.partner_id, OLD.currency, 0,
            CASE WHEN OLD.status = 'paid' THEN -OLD.amount ELSE 0 END, CASE WHEN OLD.status = 'open' THEN -OLD.amount ELSE 0 END);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.program_id IS NOT NULL AND NEW.status IN ('paid', 'open') THEN
        PERFORM program_money_move(NEW.program_id, NEW.partner_id, NEW.currency, 0,
            CASE WHEN NEW.status = 'paid' THEN NEW.amount ELSE 0 END, CASE WHEN NEW.status = 'open' THEN NEW.amount ELSE 0 END);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Only a change that can move a total fires: the sale path's other
-- updates (status to pending, reason, customer_click_id) cost nothing.
CREATE TRIGGER program_money_commission_insert AFTER INSERT ON commissions
    FOR EACH ROW WHEN (NEW.credited) EXECUTE FUNCTION program_money_commission();
CREATE TRIGGER program_money_commission_update AFTER UPDATE OF credited, amount, refunded_amount ON commissions
    FOR EACH ROW WHEN (OLD.credited IS DISTINCT FROM NEW.credited OR (NEW.credited AND
        (OLD.amount, OLD.refunded_amount) IS DISTINCT FROM (NEW.amount, NEW.refunded_amount)))
    EXECUTE FUNCTION program_money_commission();
CREATE TRIGGER program_money_commission_delete AFTER DELETE ON commissions
    FOR EACH ROW WHEN (OLD.credited) EXECUTE FUNCTION program_money_commission();
CREATE TRIGGER program_money_withdrawal AFTER INSERT OR UPDATE OR DELETE ON withdrawals
    FOR EACH ROW EXECUTE FUNCTION program_money_withdrawal();

-- What the tables already hold, in this migration's transaction (goose
-- runs each migration in one).
INSERT INTO program_money (program_id, partner_id, currency, earned, paid, open)
SELECT program_id, partner_id, currency, sum(earned), sum(paid), sum(open) FROM (
    SELECT program_id, partner_id, currency, sum(amount - refunded_amount) AS earned, 0 AS paid, 0 AS open
    FROM commissions WHERE credited GROUP BY 1, 2, 3
    UNION ALL
    SELECT program_id, partner_id, currency, 0, COALESCE(sum(amount) FILTER (WHERE status = 'paid'), 0), COALESCE(sum(amount) FILTER (WHERE status = 'open'), 0)
    FROM withdrawals WHERE program_id IS NOT NULL GROUP BY 1, 2, 3
) t
GROUP BY 1, 2, 3;

-- +goose Down
SELECT 'forward-only';
