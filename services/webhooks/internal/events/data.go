package events

// The data of each event type: the object as it is after the change, as
// far as the source event carries it (nothing is looked up or made up).
// Money is integer minor units beside its currency; ids are integers;
// times are RFC 3339 UTC. An id that may be absent is null, never 0. Field
// names follow the console's and the tracking routes' JSON (commission:
// the console's commission list; sale: amount_cents, transaction_id).
// api/openapi.yaml's Webhook* schemas describe the same fields; the
// OpenAPI test validates a sample of every type against them.

// Lead is lead.created's data: a settled lead (provisional leads are not
// leads yet: they settle attribution and count nowhere until they settle,
// and their settling is the lead.created).
type Lead struct {
	// ID is the lead's id in tracking.
	ID         int64   `json:"id"`
	CustomerID *int64  `json:"customer_id"`
	ClickID    *string `json:"click_id"`
	// PartnerID is the customer's first partner, credited with the lead.
	PartnerID   *int64  `json:"partner_id"`
	CustomerKey *string `json:"customer_key"`
	EventName   *string `json:"event_name"`
	Status      string  `json:"status"`
	Test        bool    `json:"test"`
	CreatedAt   Time    `json:"created_at"`
}

// Click is click.recorded's data.
type Click struct {
	// ID is the stored click event's id.
	ID int64 `json:"id"`
	// ClickID is the customer's click id (the svc_click_id cookie); null
	// for test clicks, which create no customer.
	ClickID     *string `json:"click_id"`
	CustomerID  *int64  `json:"customer_id"`
	NewCustomer bool    `json:"new_customer"`
	LinkID      int64   `json:"link_id"`
	// PartnerID is the partner of the link followed; FirstPartnerID the
	// customer's first partner (who a sale would credit).
	PartnerID      int64  `json:"partner_id"`
	FirstPartnerID *int64 `json:"first_partner_id"`
	Code           string `json:"code"`
	Country        string `json:"country"`
	Region         string `json:"region"`
	City           string `json:"city"`
	DeviceType     string `json:"device_type"`
	OS             string `json:"os"`
	Browser        string `json:"browser"`
	PageURL        string `json:"page_url"`
	ReferrerURL    string `json:"referrer_url"`
	AffiliateURL   string `json:"affiliate_url"`
	Test           bool   `json:"test"`
	CreatedAt      Time   `json:"created_at"`
}

// Sale is sale.created's data: the sale as the ledger stored it.
type Sale struct {
	ID            int64  `json:"id"`
	TransactionID string `json:"transaction_id"`
	CustomerID    *int64 `json:"customer_id"`
	PartnerID     *int64 `json:"partner_id"`
	AmountCents   int64  `json:"amount_cents"`
	Currency      string `json:"currency"`
	RefundedCents int64  `json:"refunded_cents"`
	// Source is "api" (the sale route) or "processor".
	Source     string `json:"source"`
	Test       bool   `json:"test"`
	OccurredAt Time   `json:"occurred_at"`
}

// SaleRefunded is sale.refunded's data: the sale's refunded total after
// this refund, and the refund itself. The sale's amount is not in the
// ledger's refund event, so it is not here (sale.created has it).
type SaleRefunded struct {
	ID            int64  `json:"id"`
	TransactionID string `json:"transaction_id"`
	Currency      string `json:"currency"`
	RefundedCents int64  `json:"refunded_cents"`
	Refund        Refund `json:"refund"`
}

// Refund is one refund of a sale, in the sale's currency.
type Refund struct {
	ID int64 `json:"id"`
	// ExternalRefundID is the brand's refund id, when it sent one.
	ExternalRefundID *string `json:"external_refund_id"`
	// RequestedCents is what the call asked (0: all that was left);
	// AmountCents what was refunded.
	RequestedCents int64 `json:"requested_cents"`
	AmountCents    int64 `json:"amount_cents"`
	// Reason is the recorded reason: the brand's refund_reason, else
	// "refund" or "chargeback" ("chargeback" for a processor dispute
	// lost).
	Reason string `json:"reason"`
	// Commission is the commission share the refund took back; null when
	// the sale has no commission.
	Commission *RefundCommission `json:"commission"`
	CreatedAt  Time              `json:"created_at"`
}

// RefundCommission is what a refund took from the sale's commission, in
// the commission's currency: Deduction the share covered, Debited the part
// taken from the partner's balance (0 when it was not credited yet).
type RefundCommission struct {
	ID        int64  `json:"id"`
	Deduction int64  `json:"deduction"`
	Debited   int64  `json:"debited"`
	Currency  string `json:"currency"`
}

// Commission is the part every commission event carries, named as in the
// console's commission list.
type Commission struct {
	ID int64 `json:"id"`
	// SaleID is null for a lead commission.
	SaleID    *int64 `json:"sale_id"`
	PartnerID int64  `json:"partner_id"`
	// Kind is "sale" or "lead".
	Kind string `json:"kind"`
	// Status is "pending", "approved", "refunded" (partly refunded) or
	// "reversed".
	Status string `json:"status"`
	// Amount is the commission as created; RefundedAmount the total
	// refunds took from it so far.
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	RefundedAmount int64  `json:"refunded_amount"`
}

// CommissionCreated is commission.created's data.
type CommissionCreated struct {
	Commission
	CustomerID *int64 `json:"customer_id"`
	// HoldUntil is when a pending commission is due for approval.
	HoldUntil Time `json:"hold_until"`
	CreatedAt Time `json:"created_at"`
}

// CommissionApproved is commission.approved's data.
type CommissionApproved struct {
	Commission
	ApprovedAt Time `json:"approved_at"`
}

// CommissionReversed is commission.reversed's data: a refund or a
// chargeback took Deduction (the commission's currency) back from it.
type CommissionReversed struct {
	Commission
	Deduction int64 `json:"deduction"`
	// Reason as recorded on the commission (see Refund.Reason).
	Reason    string `json:"reason"`
	ChangedAt Time   `json:"changed_at"`
}

// CommissionPaid is commission.paid's data: the program's payout whose
// payment covered the commission (the program's paid payouts to the
// partner cover its commissions of the program oldest first, net of
// refunds).
type CommissionPaid struct {
	Commission
	PayoutID int64 `json:"payout_id"`
	PaidAt   Time  `json:"paid_at"`
}

// PartnerEnrolled is partner.enrolled's data: a partner's approved
// enrolment in the program.
type PartnerEnrolled struct {
	// ID is the enrolment's (partner-program record's) id.
	ID        int64 `json:"id"`
	PartnerID int64 `json:"partner_id"`
	ProgramID int64 `json:"program_id"`
	Approved  bool  `json:"approved"`
	// Test: the partner is the program's `svc test` fixture partner.
	Test      bool `json:"test"`
	CreatedAt Time `json:"created_at"`
}

// Payout is payout.paid's data: a payout of the program paid to a partner.
type Payout struct {
	ID        int64  `json:"id"`
	PartnerID int64  `json:"partner_id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Status    string `json:"status"`
	PaidAt    Time   `json:"paid_at"`
}
