package pgstore

import "github.com/svc-dev/svc/libs/pg"

// The ledger's bulk writes: a transaction's deferred writes (the package
// comment) of one kind go as one statement (pg.Writes). They commute as
// pg.Writes needs: each targets a row the transaction locked before (a
// sale, a commission) or a new row whose id it took ahead, and none needs
// a row a later deferred write creates.
var (
	completeSales = pg.UpdateByID("complete %d sales", "sales",
		"reserved = false", "customer_id bigint", "partner_id bigint", "customer_click_id text", "commission_state text")
	setSalesRefunded  = pg.UpdateByID("record the refunded totals of %d sales", "sales", "refunded_cents bigint")
	updateCommissions = pg.UpdateByID("update %d commissions", "commissions",
		"status text", "refunded_amount bigint", "credited boolean", "reason text", "approved_at timestamptz", "updated_at timestamptz")
	insertCommissions = pg.InsertRows("store %d commissions", "commissions",
		"id bigint", "sale_id bigint", "program_id bigint", "partner_id bigint", "customer_id bigint", "kind text", "status text",
		"amount bigint", "currency text", "credited boolean", "reason text", "hold_until timestamptz", "approved_at timestamptz",
		"created_at timestamptz", "updated_at timestamptz", "customer_click_id text")
	insertRefunds = pg.InsertRows("store %d refunds", "refunds",
		"id bigint", "sale_id bigint", "commission_id bigint", "refund_id text", "requested_cents bigint", "amount_cents bigint",
		"deduction bigint", "debited bigint", "currency text", "reason text", "pending_notifications jsonb", "created_at timestamptz")
	insertNotifications = pg.InsertRows("store %d notifications", "notifications",
		"id bigint", "recipient_kind text", "recipient_id bigint", "kind text", "payload jsonb", "created_at timestamptz")
)
