// Package ledger is the commissions service's money ledger: sales, their
// commissions, refunds, partner balances, withdrawals and notifications. It
// applies the rules of package money (which it never re-implements) to the
// records a Store keeps, each use case in one transaction of the Store with
// the events of what it changed. It imports no pgx, net/http or kafka.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/commissions/internal/money"
)

// The domain's errors, each wrapping one errkind kind.
var (
	// ErrSaleNotFound: no sale has the transaction id (in the program).
	ErrSaleNotFound = fmt.Errorf("sale not found for transaction_id: %w", errkind.NotFound)
	// ErrCommissionNotFound, ErrWithdrawalNotFound: no such id.
	ErrCommissionNotFound = fmt.Errorf("commission not found: %w", errkind.NotFound)
	ErrWithdrawalNotFound = fmt.Errorf("withdrawal not found: %w", errkind.NotFound)
	// ErrWithdrawalNotOpen: paying or cancelling a withdrawal that is
	// already paid or cancelled.
	ErrWithdrawalNotOpen = fmt.Errorf("withdrawal is not open: %w", errkind.Conflict)
	// ErrInvalidAmount: a withdrawal that is not positive, or more than
	// is available.
	ErrInvalidAmount = fmt.Errorf("invalid amount: %w", errkind.Invalid)
	// ErrInvalidInput: a sale or refund input that breaks a precondition
	// the transport should have checked.
	ErrInvalidInput = fmt.Errorf("invalid input: %w", errkind.Invalid)
	// ErrPartnerRequired: the sale has no partner to pay (the spec's
	// "partnerId required to create commission"); the sale is stored.
	ErrPartnerRequired = fmt.Errorf("partnerId required to create commission: %w", errkind.Invalid)
	// ErrProgramUnknown: the program is not (yet) in the catalog replica,
	// or its terms are unusable; the commission waits for the backstop.
	ErrProgramUnknown = fmt.Errorf("program terms unavailable: %w", errkind.Internal)
	// ErrDisputeNotFound: no dispute was opened with the id (CloseDispute).
	ErrDisputeNotFound = fmt.Errorf("dispute not found: %w", errkind.NotFound)
	// ErrDisputeConflict: a dispute id opened before on another sale.
	ErrDisputeConflict = fmt.Errorf("dispute belongs to another sale: %w", errkind.Conflict)
)

// DuplicateSaleError is a transaction id that is already recorded; SaleID
// names the sale that stands (the 409's error.details.sale_id).
type DuplicateSaleError struct{ SaleID int64 }

func (e *DuplicateSaleError) Error() string {
	return fmt.Sprintf("duplicate transaction_id: sale %d already recorded", e.SaleID)
}

// Unwrap makes the error a conflict.
func (e *DuplicateSaleError) Unwrap() error { return errkind.Conflict }

// CommissionNotCreatedError is a sale that was stored (its transaction id
// is consumed) whose commission was not: Cause says why (ErrPartnerRequired,
// ErrProgramUnknown). A sale without a partner is final; one whose terms
// were unavailable is picked up by EnsureCommission.
type CommissionNotCreatedError struct {
	SaleID int64
	Cause  error
}

func (e *CommissionNotCreatedError) Error() string {
	return fmt.Sprintf("sale %d stored, commission not created: %v", e.SaleID, e.Cause)
}

// Unwrap gives the cause, which wraps the kind.
func (e *CommissionNotCreatedError) Unwrap() error { return e.Cause }

// Sources of a sale.
const (
	SourceAPI       = "api"
	SourceProcessor = "processor"
)

// Commission kinds.
const (
	KindSale = "sale"
	KindLead = "lead"
)

// Commission states of a sale (Sale.CommissionState) beyond money's
// reasons: "" is undecided.
const (
	StateCreated   = "created"
	StateNoPartner = "no_partner"
)

// Sale is a recorded sale.
type Sale struct {
	ID            int64
	TransactionID string
	ProgramID     int64
	CustomerID    int64
	// CustomerClickID is the customer's click id from the attribution
	// decision ('' for a test sale, and on rows older than the column
	// until the backfill fills them).
	CustomerClickID string
	PartnerID       int64
	Amount          money.Amount
	RefundedCents   int64
	Test            bool
	Source          string
	// CommissionState: "" until decided, then StateCreated, StateNoPartner
	// or the money.Reason none was due.
	CommissionState string
	// Reserved: the sale holds its transaction id while its attribution is
	// decided (ReserveSale); it has no event yet, and refunds and reads do
	// not see it. AttributionRef is the caller's opaque JSON to decide it
	// again with (the backstop).
	Reserved       bool
	AttributionRef []byte
	OccurredAt     time.Time
	CreatedAt      time.Time
}

// Commission is a partner's commission on a sale or a lead.
type Commission struct {
	ID         int64
	SaleID     int64 // 0 for a lead commission
	ProgramID  int64
	PartnerID  int64
	CustomerID int64
	// CustomerClickID is the customer's click id: the sale's, or the
	// lead event's.
	CustomerClickID string
	Kind            string
	Status          money.Status
	// Amount as created; Refunded is the sum of refund deductions so far.
	Amount     money.Amount
	Refunded   int64
	Credited   bool
	Reason     string
	HoldUntil  time.Time
	ApprovedAt *time.Time
	CreatedAt  time.Time
}

// Net is what the commission is worth after refunds.
func (c Commission) Net() money.Amount {
	return money.Amount{Minor: c.Amount.Minor - c.Refunded, Currency: c.Amount.Currency}
}

// Program is the replica's program, as the ledger needs it.
type Program struct {
	ID           int64
	AdvertiserID int64
	Terms        money.ProgramTerms
	HoldDays     int
}

// Refund is one applied refund of a sale.
type Refund struct {
	ID           int64
	SaleID       int64
	CommissionID int64 // 0: the sale has no commission
	RefundID     string
	Requested    int64
	Applied      int64
	Deduction    int64
	Debited      int64
	Currency     money.Currency // of the deduction; "" without commission
	Reason       string
	// Notifications are the ones the refund sends once it committed
	// (pending until then, and until a send succeeds).
	Notifications []Notification
	CreatedAt     time.Time
}

// Balance is a partner's balance in one currency; it may be negative.
type Balance struct {
	PartnerID int64
	Amount    money.Amount
	// Open is the total of the open withdrawals; Available is
	// max(Amount - Open, 0).
	Open      int64
	Available int64
}

// ProgramFunds is a partner's money in one program and currency: Earned is
// the net of the credited commissions there (after refunds), Paid and Open
// the program's paid and open withdrawals.
type ProgramFunds struct {
	Earned, Paid, Open int64
}

// Balance is what the program owes: earned minus paid out (may be
// negative after a refund of a paid-out commission).
func (f ProgramFunds) Balance() int64 { return f.Earned - f.Paid }

// Entry kinds of the balance journal.
const (
	EntryCredit     = "credit"
	EntryDeduction  = "deduction"
	EntryWithdrawal = "withdrawal"
)

// Entry is one journal entry of a balance.
type Entry struct {
	PartnerID    int64
	Delta        money.Amount
	Kind         string
	CommissionID int64
	RefundID     int64
	WithdrawalID int64
	// ProgramID of the commission, for the event's key.
	ProgramID int64
	At        time.Time
}

// Withdrawal statuses.
const (
	WithdrawalOpen      = "open"
	WithdrawalPaid      = "paid"
	WithdrawalCancelled = "cancelled"
)

// Withdrawal is a payout of a partner's balance.
type Withdrawal struct {
	ID        int64
	PartnerID int64
	// ProgramID is the program a console payout was opened in (0: opened
	// by the admin API for the partner as a whole).
	ProgramID int64
	// Reference is the external reference of the transfer, given when it
	// was paid from the console ("" when none).
	Reference string
	Amount    money.Amount
	Requested int64
	Status    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Notification recipients and kinds.
const (
	RecipientPartner    = "partner"
	RecipientAdvertiser = "advertiser"

	NotifyCommissionReversed = "commission_reversed"
	NotifyCommissionRefunded = "commission_refunded"
	// NotifyRefundReview: a refund reduced a commission already paid out;
	// the advertiser reviews it by hand.
	NotifyRefundReview = "refund_manual_review"
)

// Notification is an in-app notification; Payload is a JSON object.
type Notification struct {
	ID            int64
	RecipientKind string
	RecipientID   int64
	Kind          string
	Payload       map[string]any
	// ProgramID keys its event.
	ProgramID int64
	CreatedAt time.Time
}

// StatusChange is a commission's status change, for its event.
type StatusChange struct {
	From      money.Status
	Deduction int64
	At        time.Time
}

// Dispute statuses.
const (
	DisputeOpen = "open"
	DisputeWon  = "won"
	DisputeLost = "lost"
)

// Dispute is a processor dispute (chargeback) of a sale. While one is open
// the sale's commission is not approved (ApproveDue skips it); closed lost,
// the commission is reversed as by a full refund with reason chargeback.
type Dispute struct {
	// DisputeID is the processor's id (du_…), unique.
	DisputeID string
	SaleID    int64
	Status    string
	OpenedAt  time.Time
	// ClosedAt is nil while the dispute is open.
	ClosedAt *time.Time
}

// WithdrawalChange names what happened to a withdrawal, for its event.
type WithdrawalChange string

// Withdrawal changes.
const (
	WithdrawalOpened  WithdrawalChange = "opened"
	WithdrawalReduced WithdrawalChange = "reduced"
	WithdrawalPaidOut WithdrawalChange = "paid"
	WithdrawalDropped WithdrawalChange = "cancelled"
)

// Store keeps the ledger. Atomic runs fn in one transaction: every write
// of Tx, with the outbox event it implies, commits or rolls back together.
type Store interface {
	Atomic(ctx context.Context, fn func(Tx) error) error

	SaleByTransaction(ctx context.Context, programID int64, transactionID string) (Sale, error)
	Commission(ctx context.Context, id int64) (Commission, error)
	SalesWithoutCommission(ctx context.Context, olderThan time.Time, limit int) ([]int64, error)
	Balances(ctx context.Context, partnerID int64) ([]Balance, error)
	Withdrawals(ctx context.Context, partnerID int64) ([]Withdrawal, error)
	Notifications(ctx context.Context, recipientKind string, recipientID int64, limit int) ([]Notification, error)
	// SaleByID reads a sale without locking it; ErrSaleNotFound.
	SaleByID(ctx context.Context, id int64) (Sale, error)
	// SaleCommissionIDs lists the ids of a sale's commissions (at most
	// one today: a sale has one sale commission), oldest first.
	SaleCommissionIDs(ctx context.Context, saleID int64) ([]int64, error)
	// OldestDueSince is the hold_until of the oldest pending commission
	// whose hold ended at now (an open dispute's commission is not due);
	// ok false when none is due.
	OldestDueSince(ctx context.Context, now time.Time) (since time.Time, ok bool, err error)
	// ReserveSale inserts a reserved sale (s.Reserved) on its own: it
	// writes no event; a transaction id already taken is a
	// *DuplicateSaleError naming that sale.
	ReserveSale(ctx context.Context, s *Sale) error
	// ReleaseSale deletes a sale still reserved (released false when it
	// is not).
	ReleaseSale(ctx context.Context, id int64) (released bool, err error)
	// TestSaleByTransaction reads the test sale of a transaction id;
	// ErrSaleNotFound.
	TestSaleByTransaction(ctx context.Context, transactionID string) (Sale, error)
	// ReservedSales lists up to limit sales reserved before olderThan,
	// oldest first.
	ReservedSales(ctx context.Context, olderThan time.Time, limit int) ([]Sale, error)
	// RefundsToNotify lists up to limit refunds created before olderThan
	// whose notifications are still pending (ids only).
	RefundsToNotify(ctx context.Context, olderThan time.Time, limit int) ([]int64, error)
	// CountSalesWithoutCommission counts the undecided sales recorded
	// before olderThan (the backstop's backlog).
	CountSalesWithoutCommission(ctx context.Context, olderThan time.Time) (int64, error)
	// Dispute reads a dispute without locking it; ErrDisputeNotFound.
	Dispute(ctx context.Context, disputeID string) (Dispute, error)
}

// RefundLock names one LockSaleForRefund call.
type RefundLock struct {
	ProgramID     int64
	TransactionID string
	RefundID      string
	Requested     int64
}

// Tx is the ledger's operations inside one transaction. Each write stores
// the event of its change in the outbox (the pgstore documents which).
type Tx interface {
	// Program reads the replica's program; ErrProgramUnknown when absent.
	Program(ctx context.Context, id int64) (Program, error)
	// LockCustomer serialises the commission decisions of one customer of
	// a program until the transaction ends (their history must not race).
	LockCustomer(ctx context.Context, programID, customerID int64) error
	// CustomerHistory is what the customer's sale commissions in the
	// program were, as money needs it.
	CustomerHistory(ctx context.Context, programID, customerID int64) (money.History, error)
	// DecisionInputs is Program, LockCustomer and CustomerHistory in one
	// call (one round trip): the lock is taken and the history read even
	// when the program is unknown (the error is then ErrProgramUnknown).
	DecisionInputs(ctx context.Context, programID, customerID int64) (Program, money.History, error)

	// InsertSale stores s (ID, CreatedAt filled); a transaction id already
	// recorded is a *DuplicateSaleError naming the sale.
	// A reserved sale (s.Reserved) writes no event: CompleteSale does.
	InsertSale(ctx context.Context, s *Sale) error
	// CompleteSale records the reserved sale s.ID with s's customer and
	// partner (locking it), fills s from the row and writes its event; a
	// sale no longer reserved is ErrSaleNotFound.
	CompleteSale(ctx context.Context, s *Sale) error
	// ReadAheadCompletions may do, in one round trip, the locks and reads
	// CompleteSale will do for each of sales (ID, ProgramID, CustomerID),
	// in their order.
	ReadAheadCompletions(ctx context.Context, sales []Sale) error

	// LockSale reads and locks a sale by id, or by transaction id within a
	// program (programID 0: any program); ErrSaleNotFound.
	LockSale(ctx context.Context, id int64) (Sale, error)
	LockSaleByTransaction(ctx context.Context, programID int64, transactionID string) (Sale, error)
	// LockSaleForRefund is LockSaleByTransaction for a refund of requested
	// cents (0: all that is left) with refundID: the store may read ahead,
	// in the same round trip, what the refund reads next (the sale's
	// commission, locked, and RefundApplied's answer) and the ids its rows
	// will take.
	LockSaleForRefund(ctx context.Context, programID int64, transactionID, refundID string, requested int64) (Sale, error)
	// ReadAheadRefunds may do, in one round trip, what LockSaleForRefund
	// will do for each of refunds (in their order): a group of refunds
	// then pays one round trip for all their locks and reads.
	ReadAheadRefunds(ctx context.Context, refunds []RefundLock) error
	// SetCommissionState and SetSaleRefunded write a locked sale; like
	// UpdateCommission, they may reach the database only when the
	// transaction commits (nothing in it reads them back).
	SetCommissionState(ctx context.Context, saleID int64, state string) error
	SetSaleRefunded(ctx context.Context, saleID, refunded int64) error

	// InsertCommission stores c unless the sale (or the lead) already has
	// one; created reports whether it did.
	InsertCommission(ctx context.Context, c *Commission) (created bool, err error)
	// LeadCommission reads the lead commission of a customer in a program.
	LeadCommission(ctx context.Context, programID, customerID int64) (Commission, bool, error)
	// SaleCommission reads and locks the commission of a sale.
	SaleCommission(ctx context.Context, saleID int64) (Commission, bool, error)
	// UpdateCommission writes c's status, refunded amount, credited,
	// reason and approval time.
	UpdateCommission(ctx context.Context, c Commission, ch StatusChange) error
	// DuePending locks up to limit pending commissions whose hold ended,
	// skipping those another transaction holds and those whose sale has an
	// open dispute.
	DuePending(ctx context.Context, now time.Time, limit int) ([]Commission, error)
	// CreditedCommissions lists the partner's credited commissions in a
	// currency, oldest first.
	CreditedCommissions(ctx context.Context, partnerID int64, c money.Currency) ([]Commission, error)
	// ProgramCreditedCommissions is CreditedCommissions of one program.
	ProgramCreditedCommissions(ctx context.Context, programID, partnerID int64, c money.Currency) ([]Commission, error)

	// RefundApplied reports whether the refund was applied already: by
	// refund id, or, without one, by the same positive requested amount.
	RefundApplied(ctx context.Context, saleID int64, refundID string, requested int64) (bool, error)
	// InsertRefund stores r (its ID filled) and gives each of
	// r.Notifications the id it will be stored with (kept pending on the
	// refund row until sent).
	InsertRefund(ctx context.Context, r *Refund, s Sale) error

	// PostEntry appends e to the journal and moves the balance by its
	// delta; it returns the balance after.
	PostEntry(ctx context.Context, e Entry) (money.Amount, error)
	// LockBalance reads and locks a balance (zero when none).
	LockBalance(ctx context.Context, partnerID int64, c money.Currency) (money.Amount, error)
	// OpenWithdrawals lists the open withdrawals, oldest first, locked.
	OpenWithdrawals(ctx context.Context, partnerID int64, c money.Currency) ([]Withdrawal, error)
	PaidTotal(ctx context.Context, partnerID int64, c money.Currency) (int64, error)
	InsertWithdrawal(ctx context.Context, w *Withdrawal) error
	LockWithdrawal(ctx context.Context, id int64) (Withdrawal, error)
	// ProgramFunds is the partner's money in c earned in one program: the
	// net of its credited commissions there, and the program's paid and
	// open withdrawals (the console's payouts; call after LockBalance).
	ProgramFunds(ctx context.Context, programID, partnerID int64, c money.Currency) (ProgramFunds, error)
	UpdateWithdrawal(ctx context.Context, w Withdrawal, ch WithdrawalChange) error
	// CommissionPaid records that paying w at paidAt covered c (its
	// event only: whether a commission is paid out is derived, see
	// paidOut).
	CommissionPaid(ctx context.Context, c Commission, w Withdrawal, paidAt time.Time) error

	// InsertNotification stores n: with n.ID when it has one (given by
	// InsertRefund: storing it twice fails on the key), else filling it.
	InsertNotification(ctx context.Context, n *Notification) error
	// ClearRefundNotifications marks a refund's pending notifications sent,
	// for the caller to insert them (with the ids InsertRefund gave them)
	// in the same transaction; like UpdateCommission it may reach the
	// database only at commit.
	ClearRefundNotifications(ctx context.Context, refundID int64) error
	// NotifyRefundAtCommit writes a refund's notifications (with the ids
	// InsertRefund gave them) and clears its pending column with the
	// commit, behind a savepoint: when they cannot be written only they
	// are undone, the transaction commits without them (they stay pending
	// for NotifyPending) and failed is called with the error once the
	// commit is done. So they never change the refund or its answer, and
	// cost no transaction of their own.
	NotifyRefundAtCommit(ctx context.Context, refundID int64, notes []Notification, failed func(error)) error
	// TakeRefundNotifications clears and returns a refund's pending
	// notifications (none when another transaction took them).
	TakeRefundNotifications(ctx context.Context, refundID int64) ([]Notification, error)

	// InsertDispute stores d (an open dispute of a locked sale) unless its
	// id is stored already; created reports whether it did. It writes no
	// event (none exists for disputes yet).
	InsertDispute(ctx context.Context, d *Dispute) (created bool, err error)
	// LockDispute reads and locks a dispute; ErrDisputeNotFound.
	LockDispute(ctx context.Context, disputeID string) (Dispute, error)
	// CloseDispute writes a locked dispute's status and closing time.
	CloseDispute(ctx context.Context, d Dispute) error

	// ProcessorRefunds is the total of the processor refunds recorded for
	// a locked sale (RecordProcessorRefund), and whether refundID is one
	// of them.
	ProcessorRefunds(ctx context.Context, saleID int64, refundID string) (total int64, seen bool, err error)
	// RecordProcessorRefund records a processor refund's id and own amount
	// for a locked sale (whatever part of it was applied); no event.
	RecordProcessorRefund(ctx context.Context, saleID int64, refundID string, amount int64, at time.Time) error
}

// internal marks a money precondition broken by stored data (or a bug) as
// an internal error, keeping money's own error for errors.Is.
func internal(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, errkind.Internal) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, errkind.Internal, err)
}
