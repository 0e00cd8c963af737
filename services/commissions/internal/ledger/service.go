package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/commissions/internal/money"
)

// ErrUnsupportedCurrency: a sale or withdrawal currency other than USD, EUR
// and VND (the sale route's 422).
var ErrUnsupportedCurrency = fmt.Errorf("unsupported currency: %w", errkind.Unprocessable)

// Refund outcomes beyond money's reversed, refunded and skipped.
const (
	OutcomeNoCommission = "no_commission"
	// SkipAlreadyApplied is the skip reason of a refund applied before (same
	// refund_id, or without one the same amount).
	SkipAlreadyApplied = "refund already applied"
)

// DefaultApproveBatch is how many commissions ApproveDue approves per
// transaction.
const DefaultApproveBatch = 100

// Config wires the service.
type Config struct {
	Store Store
	// Now is the clock of every time rule (hold periods, record times).
	Now func() time.Time
	// ApproveBatch: commissions per ApproveDue transaction (default
	// DefaultApproveBatch).
	ApproveBatch int
	// OnRefund, when set, is told the outcome of every refund that
	// succeeded (reversed, refunded, skipped, no_commission): the wiring
	// counts them.
	OnRefund func(outcome string)
	// OnNotifyError, when set, is told when a refund's notifications
	// could not be sent after it committed (they stay pending for
	// NotifyPending): the wiring logs it.
	OnNotifyError func(error)
}

// Service is the ledger's use cases.
type Service struct {
	store         Store
	now           func() time.Time
	batch         int
	onRefund      func(string)
	onNotifyError func(error)
}

// New checks the wiring and returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Now == nil {
		return nil, errors.New("ledger: Store and Now are required")
	}
	if cfg.ApproveBatch <= 0 {
		cfg.ApproveBatch = DefaultApproveBatch
	}
	onRefund := cfg.OnRefund
	if onRefund == nil {
		onRefund = func(string) {}
	}
	onNotifyError := cfg.OnNotifyError
	if onNotifyError == nil {
		onNotifyError = func(error) {}
	}
	return &Service{store: cfg.Store, now: cfg.Now, batch: cfg.ApproveBatch, onRefund: onRefund, onNotifyError: onNotifyError}, nil
}

// SaleInput is an attributed sale to record.
type SaleInput struct {
	TransactionID string
	ProgramID     int64
	// CustomerID is tracking's customer; PartnerID the partner the sale
	// is attributed to (0: none, the sale is stored without commission).
	CustomerID int64
	// CustomerClickID is the customer's click id ('' for a test sale).
	CustomerClickID string
	PartnerID       int64
	AmountCents     int64
	Currency        string
	// OccurredAt: when the sale happened; zero is now.
	OccurredAt time.Time
	Source     string
	Test       bool
}

// SaleResult is a recorded sale, its commission when one was created, and
// otherwise why none is (NoCommission: a money.Reason or StateNoPartner;
// "" while undecided).
type SaleResult struct {
	Sale         Sale
	Commission   *Commission
	NoCommission string
}

// RecordSale stores a sale and, for a non-test sale, its commission per the
// program's terms and the customer's history, with their events, in one
// transaction. A transaction id recorded before is a *DuplicateSaleError
// naming the sale that stands. When the sale is stored but its commission
// cannot be (no partner, program terms unavailable) the sale commits and the
// error is a *CommissionNotCreatedError carrying its id, as the result does.
func (s *Service) RecordSale(ctx context.Context, in SaleInput) (SaleResult, error) {
	sale, err := s.newSale(in)
	if err != nil {
		return SaleResult{}, err
	}
	var res SaleResult
	var cause error
	err = s.store.Atomic(ctx, func(tx Tx) error {
		res, cause = SaleResult{}, nil
		row := sale
		if err := tx.InsertSale(ctx, &row); err != nil {
			return err
		}
		res, cause, err = s.decideSale(ctx, tx, row, row.CreatedAt)
		return err
	})
	if err != nil {
		return SaleResult{}, err
	}
	if cause != nil {
		return res, &CommissionNotCreatedError{SaleID: res.Sale.ID, Cause: cause}
	}
	return res, nil
}

// newSale checks in and builds the sale row RecordSale or ReserveSale
// inserts.
func (s *Service) newSale(in SaleInput) (Sale, error) {
	cur, err := money.ParseCurrency(in.Currency)
	if err != nil {
		return Sale{}, fmt.Errorf("%w: %w", ErrUnsupportedCurrency, err)
	}
	switch {
	case in.TransactionID == "":
		return Sale{}, fmt.Errorf("%w: transaction id is required", ErrInvalidInput)
	case in.AmountCents <= 0:
		return Sale{}, fmt.Errorf("%w: amount %d is not positive", ErrInvalidInput, in.AmountCents)
	case in.ProgramID <= 0:
		return Sale{}, fmt.Errorf("%w: program id %d", ErrInvalidInput, in.ProgramID)
	case in.Source != SourceAPI && in.Source != SourceProcessor:
		return Sale{}, fmt.Errorf("%w: source %q", ErrInvalidInput, in.Source)
	}
	now := s.now().UTC()
	at := in.OccurredAt
	if at.IsZero() {
		at = now
	}
	return Sale{
		TransactionID: in.TransactionID, ProgramID: in.ProgramID, CustomerID: in.CustomerID, CustomerClickID: in.CustomerClickID, PartnerID: in.PartnerID,
		Amount: money.Amount{Minor: in.AmountCents, Currency: cur}, Test: in.Test, Source: in.Source,
		OccurredAt: at.UTC(), CreatedAt: now,
	}, nil
}

// decideSale decides the commission of a just recorded sale: the result,
// and the cause when the commission could not be created.
func (s *Service) decideSale(ctx context.Context, tx Tx, sale Sale, now time.Time) (SaleResult, error, error) {
	res := SaleResult{Sale: sale}
	d, err := s.decide(ctx, tx, sale, now)
	if err != nil {
		return SaleResult{}, nil, err
	}
	res.Commission, res.NoCommission, res.Sale.CommissionState = d.commission, d.state, d.state
	if d.commission != nil {
		res.NoCommission = ""
	}
	return res, d.cause, nil
}

// ReserveSale stores a live sale whose attribution is not decided yet: it
// holds the transaction id (a second sale with it is a *DuplicateSaleError
// naming this one) but has no event, no commission, and is invisible to
// refunds and reads until CompleteSale records it or ReleaseSale gives the
// id back. ref is the caller's JSON to decide the attribution again with:
// ReservedSales hands it to the backstop when the reserving process died.
func (s *Service) ReserveSale(ctx context.Context, in SaleInput, ref []byte) (Sale, error) {
	if in.Test {
		return Sale{}, fmt.Errorf("%w: a test sale is recorded, never reserved", ErrInvalidInput)
	}
	sale, err := s.newSale(in)
	if err != nil {
		return Sale{}, err
	}
	sale.Reserved, sale.AttributionRef = true, ref
	err = s.store.ReserveSale(ctx, &sale)
	return sale, err
}

// Attributed is who tracking attributed a reserved sale to.
type Attributed struct {
	CustomerID      int64
	CustomerClickID string
	// PartnerID 0: no partner (the sale is stored without commission).
	PartnerID int64
}

// CompleteSale records a reserved sale as attributed to who and decides
// its commission, with their events, in one transaction: RecordSale's
// result and errors. A sale completed before (by the backstop, or a
// concurrent call) is answered as it stands; one released before is
// ErrSaleNotFound.
func (s *Service) CompleteSale(ctx context.Context, saleID int64, who Attributed) (SaleResult, error) {
	var res SaleResult
	var cause error
	err := s.store.Atomic(ctx, func(tx Tx) error {
		res, cause = SaleResult{}, nil
		sale := Sale{ID: saleID, CustomerID: who.CustomerID, CustomerClickID: who.CustomerClickID, PartnerID: who.PartnerID}
		err := tx.CompleteSale(ctx, &sale)
		if err == nil {
			res, cause, err = s.decideSale(ctx, tx, sale, s.now().UTC())
			return err
		}
		if !errors.Is(err, ErrSaleNotFound) {
			return err
		}
		// Completed (or released) before: answer the sale as it stands.
		sale, err = tx.LockSale(ctx, saleID)
		if err != nil {
			return err
		}
		if !sale.Reserved {
			res.Sale = sale
			res.NoCommission = sale.CommissionState
			if c, ok, err := tx.SaleCommission(ctx, sale.ID); err != nil {
				return err
			} else if ok {
				res.Commission, res.NoCommission = &c, ""
			}
			return nil
		}
		return fmt.Errorf("sale %d stayed reserved: %w", saleID, errkind.Internal)
	})
	if err != nil {
		return SaleResult{}, err
	}
	if cause != nil {
		return res, &CommissionNotCreatedError{SaleID: res.Sale.ID, Cause: cause}
	}
	return res, nil
}

// ReleaseSale deletes a sale that is still reserved, giving its
// transaction id back: tracking refused the payment or could not decide.
// released is false when the sale was completed (or released) meanwhile.
func (s *Service) ReleaseSale(ctx context.Context, saleID int64) (released bool, err error) {
	return s.store.ReleaseSale(ctx, saleID)
}

// ReservedSales lists up to limit sales reserved before olderThan: the ones
// the backstop decides again.
func (s *Service) ReservedSales(ctx context.Context, olderThan time.Time, limit int) ([]Sale, error) {
	return s.store.ReservedSales(ctx, olderThan, limit)
}

// decision is what decide did: the commission created (or found), the
// sale's commission state written ("" when undecided), and why no
// commission was created when that is a failure.
type decision struct {
	commission *Commission
	state      string
	cause      error
}

// decide creates the commission of a locked (or just inserted) sale whose
// commission is undecided, and records the decision on the sale.
func (s *Service) decide(ctx context.Context, tx Tx, sale Sale, now time.Time) (decision, error) {
	var d decision
	switch {
	case sale.Test:
		d.state = string(money.ReasonTestSale)
	case sale.PartnerID == 0:
		d.state, d.cause = StateNoPartner, ErrPartnerRequired
	}
	if d.state != "" {
		return d, tx.SetCommissionState(ctx, sale.ID, d.state)
	}
	// The program, the customer's lock and its history in one round trip.
	prog, hist, err := tx.DecisionInputs(ctx, sale.ProgramID, sale.CustomerID)
	if errors.Is(err, ErrProgramUnknown) {
		d.cause = err
		return d, nil
	}
	if err != nil {
		return d, err
	}
	terms, err := money.NewTerms(prog.Terms)
	if err != nil {
		d.cause = fmt.Errorf("program %d: %w: %w", prog.ID, ErrProgramUnknown, err)
		return d, nil
	}
	dec, err := terms.SaleCommission(money.Sale{Amount: sale.Amount, At: sale.OccurredAt, Test: sale.Test}, hist)
	if err != nil {
		return d, internal(fmt.Sprintf("commission of sale %d", sale.ID), err)
	}
	if !dec.Due {
		d.state = string(dec.Reason)
		return d, tx.SetCommissionState(ctx, sale.ID, d.state)
	}
	c := Commission{
		SaleID: sale.ID, ProgramID: sale.ProgramID, PartnerID: sale.PartnerID, CustomerID: sale.CustomerID,
		CustomerClickID: sale.CustomerClickID, Kind: KindSale, Status: money.StatusPending, Amount: dec.Amount,
		HoldUntil: now.Add(time.Duration(max(prog.HoldDays, 0)) * 24 * time.Hour), CreatedAt: now,
	}
	if prog.HoldDays <= 0 {
		c.Status, c.Credited, c.ApprovedAt = money.StatusApproved, true, &now
	}
	created, err := tx.InsertCommission(ctx, &c)
	if err != nil {
		return d, err
	}
	if !created {
		// Only under a broken lock discipline: the sale is locked or new.
		existing, ok, err := tx.SaleCommission(ctx, sale.ID)
		if err != nil {
			return d, err
		}
		if !ok {
			return d, fmt.Errorf("sale %d: commission neither created nor found: %w", sale.ID, errkind.Internal)
		}
		c = existing
	} else if c.Credited {
		if _, err := tx.PostEntry(ctx, Entry{
			PartnerID: c.PartnerID, Delta: c.Amount, Kind: EntryCredit, CommissionID: c.ID, ProgramID: c.ProgramID, At: now,
		}); err != nil {
			return d, err
		}
	}
	d.commission, d.state = &c, StateCreated
	return d, tx.SetCommissionState(ctx, sale.ID, d.state)
}

// LeadInput is a settled lead (tracking's LeadRecorded with status
// settled): provisional leads are not settled and must not be passed.
type LeadInput struct {
	ProgramID  int64
	CustomerID int64
	// ClickID is the customer's click id (the lead event's).
	ClickID string
	// PartnerID: the customer's first partner, credited with the lead.
	PartnerID int64
	Test      bool
}

// LeadResult is the lead's commission, or why there is none (a
// money.Reason).
type LeadResult struct {
	Commission   *Commission
	NoCommission string
}

// RecordLead creates the per-lead commission of a settled lead
// (money.Terms.LeadCommission: the program's lead_commission in its
// currency; none when it is 0 or the lead a test), with the same hold as a
// sale commission. A customer earns at most one lead commission per program
// (a unique key): recording the lead again answers the commission that
// exists, so redelivered lead events are harmless.
func (s *Service) RecordLead(ctx context.Context, in LeadInput) (LeadResult, error) {
	if in.ProgramID <= 0 || in.CustomerID <= 0 {
		return LeadResult{}, fmt.Errorf("%w: lead of customer %d in program %d", ErrInvalidInput, in.CustomerID, in.ProgramID)
	}
	if in.PartnerID == 0 {
		return LeadResult{}, ErrPartnerRequired
	}
	now := s.now().UTC()
	var res LeadResult
	err := s.store.Atomic(ctx, func(tx Tx) error {
		res = LeadResult{}
		prog, err := tx.Program(ctx, in.ProgramID)
		if err != nil {
			return err
		}
		terms, err := money.NewTerms(prog.Terms)
		if err != nil {
			return fmt.Errorf("program %d: %w: %w", prog.ID, ErrProgramUnknown, err)
		}
		d := terms.LeadCommission(in.Test)
		if !d.Due {
			res.NoCommission = string(d.Reason)
			return nil
		}
		c := Commission{
			ProgramID: in.ProgramID, PartnerID: in.PartnerID, CustomerID: in.CustomerID, CustomerClickID: in.ClickID, Kind: KindLead,
			Status: money.StatusPending, Amount: d.Amount, CreatedAt: now,
			HoldUntil: now.Add(time.Duration(max(prog.HoldDays, 0)) * 24 * time.Hour),
		}
		if prog.HoldDays <= 0 {
			c.Status, c.Credited, c.ApprovedAt = money.StatusApproved, true, &now
		}
		created, err := tx.InsertCommission(ctx, &c)
		if err != nil {
			return err
		}
		if !created {
			existing, ok, err := tx.LeadCommission(ctx, in.ProgramID, in.CustomerID)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("lead of customer %d: commission neither created nor found: %w", in.CustomerID, errkind.Internal)
			}
			res.Commission = &existing
			return nil
		}
		if c.Credited {
			if _, err := tx.PostEntry(ctx, Entry{
				PartnerID: c.PartnerID, Delta: c.Amount, Kind: EntryCredit, CommissionID: c.ID, ProgramID: c.ProgramID, At: now,
			}); err != nil {
				return err
			}
		}
		res.Commission = &c
		return nil
	})
	if err != nil {
		return LeadResult{}, err
	}
	return res, nil
}

// EnsureResult is the commission state of a sale after EnsureCommission.
type EnsureResult struct {
	Commission *Commission
	// State is the sale's commission state (StateCreated, StateNoPartner
	// or a money.Reason).
	State string
	// Decided: this call decided the sale (false: it was decided before,
	// by RecordSale, a refund or another backstop run).
	Decided bool
}

// EnsureCommission decides the commission of a recorded sale whose
// commission is undecided (RecordSale could not read the program's terms):
// the backstop. It is idempotent and safe to run concurrently: the sale row
// is locked and a sale has at most one commission (a unique key). A sale
// already decided is answered as it is. Terms still unavailable are an error
// (ErrProgramUnknown); the sale stays undecided.
func (s *Service) EnsureCommission(ctx context.Context, saleID int64) (EnsureResult, error) {
	var res EnsureResult
	err := s.store.Atomic(ctx, func(tx Tx) error {
		res = EnsureResult{}
		sale, err := tx.LockSale(ctx, saleID)
		if err != nil {
			return err
		}
		if sale.Reserved {
			return fmt.Errorf("sale %d is reserved, not recorded: %w", saleID, ErrSaleNotFound)
		}
		if sale.CommissionState != "" {
			res.State = sale.CommissionState
			if c, ok, err := tx.SaleCommission(ctx, sale.ID); err != nil {
				return err
			} else if ok {
				res.Commission = &c
			}
			return nil
		}
		d, err := s.decide(ctx, tx, sale, s.now().UTC())
		if err != nil {
			return err
		}
		if d.state == "" {
			return fmt.Errorf("sale %d: %w", sale.ID, d.cause)
		}
		res.Commission, res.State, res.Decided = d.commission, d.state, true
		return nil
	})
	return res, err
}

// SalesWithoutCommission lists up to limit sales recorded before olderThan
// whose commission is still undecided, oldest first: what the backstop
// passes to EnsureCommission.
func (s *Service) SalesWithoutCommission(ctx context.Context, olderThan time.Time, limit int) ([]int64, error) {
	return s.store.SalesWithoutCommission(ctx, olderThan, limit)
}

// RefundInput is one refund of a sale (POST /track/refund, or the
// processor's refund event).
type RefundInput struct {
	ProgramID     int64
	TransactionID string
	// AmountCents: this refund in the sale's minor units; 0 refunds all
	// that is left.
	AmountCents int64
	// RefundID: the brand's refund id ("" when not sent); ignored when
	// AmountCents is 0.
	RefundID string
	// Reason: refund_reason, else reason (the transport decides).
	Reason string
}

// RefundResult answers a refund.
type RefundResult struct {
	// Outcome: reversed, refunded, skipped or no_commission.
	Outcome      string
	SkipReason   string
	SaleID       int64
	CommissionID int64
	// Applied is the part of the sale refunded by this call.
	Applied int64
	// Deduction is the commission share this refund covered
	// (deductionAmount), Debit what was taken from the balance.
	Deduction money.Amount
	Debit     money.Amount
	// notify is the refund row whose notifications are sent after the
	// transaction (0: none).
	notify int64
}

// Refund applies the spec's refund table to the sale of TransactionID in
// ProgramID, in one transaction that locks the sale first, so concurrent
// refunds of one sale apply one after the other:
//   - no such sale in the program: ErrSaleNotFound;
//   - a positive amount whose refund_id (or, without one, whose amount) was
//     applied before: skipped, "refund already applied", nothing written;
//   - a sale without commission: its refunded total grows (capped) and the
//     outcome is no_commission;
//   - otherwise money.ApplyRefund: a reversed commission is skipped
//     ("already reversed"); else the sale's refunded total, the refund, the
//     commission's status and refunded amount, the balance deduction when
//     it was credited (open withdrawals reduced newest first to fit), the
//     partner's notification and, when the commission was already paid out,
//     the advertiser's manual-review warning, with their events.
//
// A non-test sale whose commission is undecided gets it decided first (as
// EnsureCommission), so a refund never races the backstop.
func (s *Service) Refund(ctx context.Context, in RefundInput) (RefundResult, error) {
	if in.TransactionID == "" || in.AmountCents < 0 {
		return RefundResult{}, fmt.Errorf("%w: refund of %q for %d", ErrInvalidInput, in.TransactionID, in.AmountCents)
	}
	refundID := in.RefundID
	if in.AmountCents == 0 {
		refundID = ""
	}
	now := s.now().UTC()
	var res RefundResult
	err := s.store.Atomic(ctx, func(tx Tx) error {
		res = RefundResult{}
		sale, err := tx.LockSaleByTransaction(ctx, in.ProgramID, in.TransactionID)
		if err != nil {
			return err
		}
		return s.refundLocked(ctx, tx, sale, in, refundID, now, &res)
	})
	if err != nil {
		return RefundResult{}, err
	}
	s.refunded(ctx, res)
	return res, nil
}

// refunded is what follows a committed refund: it is counted, and its
// notifications are sent in a transaction of their own (a failure never
// changes the answer, and leaves them pending for the backstop,
// NotifyPending).
func (s *Service) refunded(ctx context.Context, res RefundResult) {
	s.onRefund(res.Outcome)
	if res.notify != 0 {
		if err := s.SendRefundNotifications(context.WithoutCancel(ctx), res.notify); err != nil {
			s.onNotifyError(fmt.Errorf("notifications of refund %d (left for the backstop): %w", res.notify, err))
		}
	}
}

// refundLocked applies a refund to a sale locked by the transaction (Refund's
// table, after the sale lookup); refundID is what the refund row keeps.
func (s *Service) refundLocked(ctx context.Context, tx Tx, sale Sale, in RefundInput, refundID string, now time.Time, res *RefundResult) error {
	res.SaleID = sale.ID
	if !sale.Test && sale.CommissionState == "" {
		d, err := s.decide(ctx, tx, sale, now)
		if err != nil {
			return err
		}
		if d.state == "" {
			return fmt.Errorf("refund of sale %d: %w", sale.ID, d.cause)
		}
	}
	c, hasCommission, err := tx.SaleCommission(ctx, sale.ID)
	if err != nil {
		return err
	}
	if hasCommission {
		res.CommissionID = c.ID
		res.Deduction = money.Amount{Currency: c.Amount.Currency}
		res.Debit = res.Deduction
	}
	if in.AmountCents > 0 {
		applied, err := tx.RefundApplied(ctx, sale.ID, refundID, in.AmountCents)
		if err != nil {
			return err
		}
		if applied {
			res.Outcome, res.SkipReason = string(money.OutcomeSkipped), SkipAlreadyApplied
			if !hasCommission {
				res.Outcome, res.SkipReason = OutcomeNoCommission, ""
			}
			return nil
		}
	}
	if !hasCommission {
		return s.refundWithoutCommission(ctx, tx, sale, in, refundID, now, res)
	}
	return s.refundCommission(ctx, tx, sale, c, in, refundID, now, res)
}

// SendRefundNotifications writes a refund's pending notifications, with
// their events, once: a refund whose notifications were sent (by another
// caller) sends nothing.
func (s *Service) SendRefundNotifications(ctx context.Context, refundID int64) error {
	return s.store.Atomic(ctx, func(tx Tx) error {
		notes, err := tx.TakeRefundNotifications(ctx, refundID)
		if err != nil {
			return err
		}
		for i := range notes {
			if err := tx.InsertNotification(ctx, &notes[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// NotifyPending sends the notifications still pending of up to limit
// refunds created before olderThan (the backstop): how many refunds it
// sent, and the first error.
func (s *Service) NotifyPending(ctx context.Context, olderThan time.Time, limit int) (int, error) {
	ids, err := s.store.RefundsToNotify(ctx, olderThan, limit)
	if err != nil {
		return 0, err
	}
	sent := 0
	var first error
	for _, id := range ids {
		if err := s.SendRefundNotifications(ctx, id); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		sent++
	}
	return sent, first
}

// refundWithoutCommission adds the refund to the sale's refunded total
// (capped; money.ApplyRefund over a zero commission does the arithmetic).
func (s *Service) refundWithoutCommission(ctx context.Context, tx Tx, sale Sale, in RefundInput, refundID string, now time.Time, res *RefundResult) error {
	res.Outcome = OutcomeNoCommission
	r, err := money.ApplyRefund(money.Refund{
		Commission: money.Amount{Currency: sale.Amount.Currency}, Status: money.StatusPending,
		SaleAmount: sale.Amount.Minor, SaleRefunded: sale.RefundedCents, Amount: in.AmountCents,
	})
	if err != nil {
		return internal(fmt.Sprintf("refund of sale %d", sale.ID), err)
	}
	res.Applied = r.Applied
	if r.Applied == 0 && in.AmountCents == 0 {
		return nil // nothing left, nothing to remember
	}
	if err := tx.SetSaleRefunded(ctx, sale.ID, r.SaleRefunded); err != nil {
		return err
	}
	sale.RefundedCents = r.SaleRefunded
	ref := Refund{SaleID: sale.ID, RefundID: refundID, Requested: in.AmountCents, Applied: r.Applied, Reason: in.Reason, CreatedAt: now}
	return tx.InsertRefund(ctx, &ref, sale)
}

func (s *Service) refundCommission(ctx context.Context, tx Tx, sale Sale, c Commission, in RefundInput, refundID string, now time.Time, res *RefundResult) error {
	r, err := money.ApplyRefund(money.Refund{
		Commission: c.Amount, Status: c.Status, Credited: c.Credited,
		SaleAmount: sale.Amount.Minor, SaleRefunded: sale.RefundedCents, Amount: in.AmountCents,
	})
	if err != nil {
		return internal(fmt.Sprintf("refund of sale %d", sale.ID), err)
	}
	res.Outcome, res.SkipReason = string(r.Outcome), r.SkipReason
	if r.Outcome == money.OutcomeSkipped {
		return nil
	}
	res.Applied, res.Deduction, res.Debit = r.Applied, r.Deduction, r.Debit

	// Was it paid out, before this refund reduced it?
	paidOut := false
	if c.Credited {
		if paidOut, err = s.paidOut(ctx, tx, c); err != nil {
			return err
		}
	}

	if err := tx.SetSaleRefunded(ctx, sale.ID, r.SaleRefunded); err != nil {
		return err
	}
	sale.RefundedCents = r.SaleRefunded
	notes, err := s.refundNotifications(ctx, tx, sale, c, r, in.Reason, paidOut, now)
	if err != nil {
		return err
	}
	ref := Refund{
		SaleID: sale.ID, CommissionID: c.ID, RefundID: refundID, Requested: in.AmountCents, Applied: r.Applied,
		Deduction: r.Deduction.Minor, Debited: r.Debit.Minor, Currency: c.Amount.Currency, Reason: in.Reason,
		Notifications: notes, CreatedAt: now,
	}
	if err := tx.InsertRefund(ctx, &ref, sale); err != nil {
		return err
	}
	res.notify = ref.ID
	from := c.Status
	c.Status, c.Refunded = r.Status, c.Refunded+r.Deduction.Minor
	if in.Reason != "" {
		c.Reason = in.Reason
	}
	if err := tx.UpdateCommission(ctx, c, StatusChange{From: from, Deduction: r.Deduction.Minor, At: now}); err != nil {
		return err
	}
	if r.Debit.Minor > 0 {
		bal, err := tx.PostEntry(ctx, Entry{
			PartnerID: c.PartnerID, Delta: money.Amount{Minor: -r.Debit.Minor, Currency: r.Debit.Currency}, Kind: EntryDeduction,
			CommissionID: c.ID, RefundID: ref.ID, ProgramID: c.ProgramID, At: now,
		})
		if err != nil {
			return err
		}
		if err := s.fitWithdrawals(ctx, tx, c.PartnerID, bal, now); err != nil {
			return err
		}
	}

	return nil
}

// refundNotifications are the notifications a refund of c sends: the
// partner's, and the advertiser's manual-review warning when c was already
// paid out.
func (s *Service) refundNotifications(ctx context.Context, tx Tx, sale Sale, c Commission, r money.RefundResult, reason string, paidOut bool, now time.Time) ([]Notification, error) {
	kind := NotifyCommissionRefunded
	if r.Status == money.StatusReversed {
		kind = NotifyCommissionReversed
	}
	payload := map[string]any{
		"commission_id": c.ID, "sale_id": sale.ID, "transaction_id": sale.TransactionID, "program_id": sale.ProgramID,
		"status": string(r.Status), "deduction": r.Deduction.Minor, "debited": r.Debit.Minor,
		"currency": string(c.Amount.Currency), "reason": reason,
		"refunded_cents": r.Applied, "sale_currency": string(sale.Amount.Currency),
	}
	out := []Notification{{
		RecipientKind: RecipientPartner, RecipientID: c.PartnerID, Kind: kind, Payload: payload, ProgramID: sale.ProgramID, CreatedAt: now,
	}}
	if !paidOut {
		return out, nil
	}
	prog, err := tx.Program(ctx, sale.ProgramID)
	if err != nil {
		return nil, fmt.Errorf("advertiser of program %d: %w", sale.ProgramID, err)
	}
	review := map[string]any{"partner_id": c.PartnerID}
	for k, v := range payload {
		review[k] = v
	}
	return append(out, Notification{
		RecipientKind: RecipientAdvertiser, RecipientID: prog.AdvertiserID, Kind: NotifyRefundReview, Payload: review,
		ProgramID: sale.ProgramID, CreatedAt: now,
	}), nil
}

// paidOut reports whether c is among the partner's commissions (in c's
// currency, oldest first, net of refunds) that the paid withdrawals cover.
func (s *Service) paidOut(ctx context.Context, tx Tx, c Commission) (bool, error) {
	list, err := tx.CreditedCommissions(ctx, c.PartnerID, c.Amount.Currency)
	if err != nil {
		return false, err
	}
	paid, err := tx.PaidTotal(ctx, c.PartnerID, c.Amount.Currency)
	if err != nil {
		return false, err
	}
	nets := make([]money.Amount, len(list))
	idx := -1
	for i, x := range list {
		nets[i] = x.Net()
		if x.ID == c.ID {
			idx = i
		}
	}
	n, err := money.PaidOut(nets, money.Amount{Minor: paid, Currency: c.Amount.Currency})
	if err != nil {
		return false, internal(fmt.Sprintf("paid out of partner %d", c.PartnerID), err)
	}
	return idx >= 0 && idx < n, nil
}

// fitWithdrawals reduces the partner's open withdrawals, newest first, to
// fit the balance (money.FitWithdrawals).
func (s *Service) fitWithdrawals(ctx context.Context, tx Tx, partnerID int64, bal money.Amount, now time.Time) error {
	open, err := tx.OpenWithdrawals(ctx, partnerID, bal.Currency)
	if err != nil {
		return err
	}
	ws := make([]money.Withdrawal, len(open))
	byID := make(map[int64]Withdrawal, len(open))
	for i, w := range open {
		ws[i] = money.Withdrawal{ID: w.ID, Amount: w.Amount}
		byID[w.ID] = w
	}
	changes, err := money.FitWithdrawals(bal, ws)
	if err != nil {
		return internal(fmt.Sprintf("fit withdrawals of partner %d", partnerID), err)
	}
	for _, ch := range changes {
		w := byID[ch.ID]
		w.Amount, w.UpdatedAt = ch.To, now
		change := WithdrawalReduced
		if ch.Cancelled {
			w.Status, change = WithdrawalCancelled, WithdrawalDropped
		}
		if err := tx.UpdateWithdrawal(ctx, w, change); err != nil {
			return err
		}
	}
	return nil
}

// ApproveDue approves every pending commission whose hold ended at now and
// credits its partner's balance, in transactions of ApproveBatch
// commissions. Several replicas may run it at once: each transaction locks
// its batch with SKIP LOCKED and re-checks the status, so every commission
// is approved and credited exactly once. It returns how many it approved.
func (s *Service) ApproveDue(ctx context.Context, now time.Time) (int, error) {
	now = now.UTC()
	total := 0
	for {
		n := 0
		err := s.store.Atomic(ctx, func(tx Tx) error {
			n = 0
			due, err := tx.DuePending(ctx, now, s.batch)
			if err != nil {
				return err
			}
			// Balances are locked in one order by every approver.
			slices.SortFunc(due, func(a, b Commission) int {
				return cmp.Or(cmp.Compare(a.PartnerID, b.PartnerID), cmp.Compare(a.Amount.Currency, b.Amount.Currency), cmp.Compare(a.ID, b.ID))
			})
			for _, c := range due {
				from := c.Status
				at := now
				c.Status, c.Credited, c.ApprovedAt = money.StatusApproved, true, &at
				if err := tx.UpdateCommission(ctx, c, StatusChange{From: from, At: now}); err != nil {
					return err
				}
				if _, err := tx.PostEntry(ctx, Entry{
					PartnerID: c.PartnerID, Delta: c.Amount, Kind: EntryCredit, CommissionID: c.ID, ProgramID: c.ProgramID, At: now,
				}); err != nil {
					return err
				}
			}
			n = len(due)
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("approve due commissions: %w", err)
		}
		total += n
		if n < s.batch {
			return total, nil
		}
	}
}

// Balances lists the partner's balances, one per currency.
func (s *Service) Balances(ctx context.Context, partnerID int64) ([]Balance, error) {
	return s.store.Balances(ctx, partnerID)
}

// OpenWithdrawal opens a withdrawal of amount minor units of currency (0:
// all that is available). Available is the balance minus the open
// withdrawals; more than that, or nothing, is ErrInvalidAmount.
func (s *Service) OpenWithdrawal(ctx context.Context, partnerID int64, currency string, amount int64) (Withdrawal, error) {
	cur, err := money.ParseCurrency(currency)
	if err != nil {
		return Withdrawal{}, fmt.Errorf("%w: %w", ErrUnsupportedCurrency, err)
	}
	if amount < 0 {
		return Withdrawal{}, fmt.Errorf("%w: %d is negative", ErrInvalidAmount, amount)
	}
	now := s.now().UTC()
	var w Withdrawal
	err = s.store.Atomic(ctx, func(tx Tx) error {
		bal, err := tx.LockBalance(ctx, partnerID, cur)
		if err != nil {
			return err
		}
		open, err := tx.OpenWithdrawals(ctx, partnerID, cur)
		if err != nil {
			return err
		}
		avail := bal.Minor
		for _, o := range open {
			avail -= o.Amount.Minor
		}
		avail = max(avail, 0)
		want := amount
		if want == 0 {
			want = avail
		}
		if want <= 0 || want > avail {
			return fmt.Errorf("%w: %s requested, %s available", ErrInvalidAmount,
				money.Amount{Minor: want, Currency: cur}, money.Amount{Minor: avail, Currency: cur})
		}
		w = Withdrawal{
			PartnerID: partnerID, Amount: money.Amount{Minor: want, Currency: cur}, Requested: want,
			Status: WithdrawalOpen, CreatedAt: now, UpdatedAt: now,
		}
		return tx.InsertWithdrawal(ctx, &w)
	})
	if err != nil {
		return Withdrawal{}, err
	}
	return w, nil
}

// PayWithdrawal marks an open withdrawal paid and takes its amount from the
// balance (a withdrawal journal entry).
func (s *Service) PayWithdrawal(ctx context.Context, id int64) (Withdrawal, error) {
	return s.closeWithdrawal(ctx, id, WithdrawalPaid)
}

// CancelWithdrawal cancels an open withdrawal; the balance is unchanged.
func (s *Service) CancelWithdrawal(ctx context.Context, id int64) (Withdrawal, error) {
	return s.closeWithdrawal(ctx, id, WithdrawalCancelled)
}

func (s *Service) closeWithdrawal(ctx context.Context, id int64, status string) (Withdrawal, error) {
	now := s.now().UTC()
	var w Withdrawal
	err := s.store.Atomic(ctx, func(tx Tx) error {
		var err error
		if w, err = tx.LockWithdrawal(ctx, id); err != nil {
			return err
		}
		if w.Status != WithdrawalOpen {
			return fmt.Errorf("withdrawal %d is %s: %w", id, w.Status, ErrWithdrawalNotOpen)
		}
		w.Status, w.UpdatedAt = status, now
		change := WithdrawalDropped
		if status == WithdrawalPaid {
			change = WithdrawalPaidOut
		}
		if err := tx.UpdateWithdrawal(ctx, w, change); err != nil {
			return err
		}
		if status != WithdrawalPaid {
			return nil
		}
		_, err = tx.PostEntry(ctx, Entry{
			PartnerID: w.PartnerID, Delta: money.Amount{Minor: -w.Amount.Minor, Currency: w.Amount.Currency},
			Kind: EntryWithdrawal, WithdrawalID: w.ID, At: now,
		})
		return err
	})
	if err != nil {
		return Withdrawal{}, err
	}
	return w, nil
}

// Withdrawals lists the partner's withdrawals, newest first.
func (s *Service) Withdrawals(ctx context.Context, partnerID int64) ([]Withdrawal, error) {
	return s.store.Withdrawals(ctx, partnerID)
}

// NotificationsLimit is how many notifications Notifications answers.
const NotificationsLimit = 100

// Notifications lists a recipient's latest notifications, newest first.
func (s *Service) Notifications(ctx context.Context, recipientKind string, recipientID int64) ([]Notification, error) {
	if recipientKind != RecipientPartner && recipientKind != RecipientAdvertiser {
		return nil, fmt.Errorf("%w: recipient kind %q", ErrInvalidInput, recipientKind)
	}
	return s.store.Notifications(ctx, recipientKind, recipientID, NotificationsLimit)
}

// Commission reads a commission; ErrCommissionNotFound.
func (s *Service) Commission(ctx context.Context, id int64) (Commission, error) {
	return s.store.Commission(ctx, id)
}

// SaleByTransaction reads the sale of a transaction id within a program
// (programID 0: any program, the id being global); ErrSaleNotFound. A test
// sale is answered like any other (Sale.Test): the caller decides what a
// test key may see.
func (s *Service) SaleByTransaction(ctx context.Context, programID int64, transactionID string) (Sale, error) {
	return s.store.SaleByTransaction(ctx, programID, transactionID)
}

// CommissionDetail is a commission as the admin API shows it: with its
// sale's transaction id ("" for a lead commission) and whether the
// partner's paid withdrawals already cover it (money.PaidOut).
type CommissionDetail struct {
	Commission
	TransactionID string
	PaidOut       bool
}

// CommissionDetail reads a commission with its sale's transaction id and
// whether it is paid out; ErrCommissionNotFound.
func (s *Service) CommissionDetail(ctx context.Context, id int64) (CommissionDetail, error) {
	c, err := s.store.Commission(ctx, id)
	if err != nil {
		return CommissionDetail{}, err
	}
	d := CommissionDetail{Commission: c}
	if c.SaleID != 0 {
		sale, err := s.store.SaleByID(ctx, c.SaleID)
		if err != nil {
			return CommissionDetail{}, fmt.Errorf("sale of commission %d: %w", id, err)
		}
		d.TransactionID = sale.TransactionID
	}
	if !c.Credited {
		return d, nil
	}
	err = s.store.Atomic(ctx, func(tx Tx) error {
		var err error
		d.PaidOut, err = s.paidOut(ctx, tx, c)
		return err
	})
	if err != nil {
		return CommissionDetail{}, err
	}
	return d, nil
}

// SaleDetail is a sale with the ids of its commissions.
type SaleDetail struct {
	Sale
	CommissionIDs []int64
}

// SaleDetail reads the sale of a transaction id (any program) that is a
// test sale when test is set, a live one otherwise; ErrSaleNotFound.
func (s *Service) SaleDetail(ctx context.Context, transactionID string, test bool) (SaleDetail, error) {
	read := func() (Sale, error) { return s.store.SaleByTransaction(ctx, 0, transactionID) }
	if test {
		read = func() (Sale, error) { return s.store.TestSaleByTransaction(ctx, transactionID) }
	}
	sale, err := read()
	if err != nil {
		return SaleDetail{}, err
	}
	if sale.Test != test {
		return SaleDetail{}, fmt.Errorf("sale %q (test %t): %w", transactionID, test, ErrSaleNotFound)
	}
	ids, err := s.store.SaleCommissionIDs(ctx, sale.ID)
	if err != nil {
		return SaleDetail{}, err
	}
	return SaleDetail{Sale: sale, CommissionIDs: ids}, nil
}

// ApprovalLag is how long the oldest pending commission due at now has
// been due (0 when none is): how late the approval scheduler is.
func (s *Service) ApprovalLag(ctx context.Context, now time.Time) (time.Duration, error) {
	since, ok, err := s.store.OldestDueSince(ctx, now)
	if err != nil || !ok {
		return 0, err
	}
	return max(now.Sub(since), 0), nil
}

// BackstopBacklog counts the sales recorded before olderThan whose
// commission is still undecided.
func (s *Service) BackstopBacklog(ctx context.Context, olderThan time.Time) (int64, error) {
	return s.store.CountSalesWithoutCommission(ctx, olderThan)
}

// ReasonChargeback is the refund reason of a dispute closed lost.
const ReasonChargeback = "chargeback"

// OpenDispute records that the processor opened dispute disputeID on the
// sale: while it is open, ApproveDue does not approve the sale's commission
// (a commission approved before stays credited). It is idempotent per
// dispute id: opening it again (a redelivered event) changes nothing, and
// so does opening it after it closed. It locks the sale, the dispute, then
// the sale's commission (if any), so the dispute and an approval of that
// commission apply one after the other. A sale unknown, or still reserved, is
// ErrSaleNotFound; a dispute id opened before on another sale is
// ErrDisputeConflict. No event is written (there is no dispute event yet).
func (s *Service) OpenDispute(ctx context.Context, saleID int64, disputeID string) error {
	if saleID <= 0 || disputeID == "" {
		return fmt.Errorf("%w: dispute %q of sale %d", ErrInvalidInput, disputeID, saleID)
	}
	now := s.now().UTC()
	return s.store.Atomic(ctx, func(tx Tx) error {
		sale, err := tx.LockSale(ctx, saleID)
		if err != nil {
			return err
		}
		if sale.Reserved {
			return fmt.Errorf("sale %d is reserved, not recorded: %w", saleID, ErrSaleNotFound)
		}
		d := Dispute{DisputeID: disputeID, SaleID: sale.ID, Status: DisputeOpen, OpenedAt: now}
		created, err := tx.InsertDispute(ctx, &d)
		if err != nil {
			return err
		}
		if !created {
			existing, err := tx.LockDispute(ctx, disputeID)
			if err != nil {
				return err
			}
			if existing.SaleID != sale.ID {
				return fmt.Errorf("dispute %q is of sale %d, not %d: %w", disputeID, existing.SaleID, sale.ID, ErrDisputeConflict)
			}
			return nil
		}
		// Wait for an approval holding the commission: it commits first
		// (the commission stays credited) or finds the dispute open.
		_, _, err = tx.SaleCommission(ctx, sale.ID)
		return err
	})
}

// DisputeResult answers CloseDispute.
type DisputeResult struct {
	Dispute Dispute
	// Closed: this call closed the dispute. False when it was closed
	// before (nothing written, Dispute is as it stands).
	Closed bool
	// Refund is the chargeback's reversal when this call closed the
	// dispute lost (nil otherwise): Refund's result, its outcome counted
	// and its notifications sent as Refund's are.
	Refund *RefundResult
}

// CloseDispute closes an open dispute with the processor's outcome, won or
// lost, in one transaction that locks the sale, then the dispute:
//   - won: the hold is released; the next ApproveDue approves the commission
//     if its hold ended (and no other dispute of the sale is open);
//   - lost: the commission is reversed exactly as by a full refund (Refund
//     with amount 0) with reason chargeback, the refund row keyed
//     "dispute:<id>": a pending commission is reversed without balance
//     change, a credited one is deducted from the balance, with the
//     partner's notification (and the advertiser's manual review when it
//     was paid out);
//   - closed before (whatever the outcome now): nothing changes, Closed is
//     false.
//
// An unknown dispute id is ErrDisputeNotFound.
func (s *Service) CloseDispute(ctx context.Context, disputeID, outcome string) (DisputeResult, error) {
	if disputeID == "" || (outcome != DisputeWon && outcome != DisputeLost) {
		return DisputeResult{}, fmt.Errorf("%w: close dispute %q as %q", ErrInvalidInput, disputeID, outcome)
	}
	// The sale comes first in the lock order: find it, lock it, then lock
	// the dispute and look at its status again.
	d, err := s.store.Dispute(ctx, disputeID)
	if err != nil {
		return DisputeResult{}, err
	}
	now := s.now().UTC()
	var res DisputeResult
	var refund RefundResult
	err = s.store.Atomic(ctx, func(tx Tx) error {
		res, refund = DisputeResult{}, RefundResult{}
		// The dispute id names one sale for good (InsertDispute).
		sale, err := tx.LockSale(ctx, d.SaleID)
		if err != nil {
			return err
		}
		if res.Dispute, err = tx.LockDispute(ctx, disputeID); err != nil {
			return err
		}
		if res.Dispute.Status != DisputeOpen {
			return nil
		}
		res.Dispute.Status, res.Dispute.ClosedAt, res.Closed = outcome, &now, true
		if err := tx.CloseDispute(ctx, res.Dispute); err != nil {
			return err
		}
		if outcome == DisputeWon {
			return nil
		}
		// A full refund (amount 0: all that is left), keyed by the dispute.
		in := RefundInput{ProgramID: sale.ProgramID, TransactionID: sale.TransactionID, Reason: ReasonChargeback}
		return s.refundLocked(ctx, tx, sale, in, "dispute:"+disputeID, now, &refund)
	})
	if err != nil {
		return DisputeResult{}, err
	}
	if res.Closed && outcome == DisputeLost {
		s.refunded(ctx, refund)
		res.Refund = &refund
	}
	return res, nil
}

// RefundToInput is the processor's cumulative refund of a sale (a
// charge.refunded event: the charge's amount_refunded).
type RefundToInput struct {
	ProgramID     int64
	TransactionID string
	// CumulativeCents: all that the processor has refunded of the sale so
	// far, in the sale's minor units.
	CumulativeCents int64
	// RefundID keys the part it applies (required), e.g. the charge id,
	// ":" and the cumulative amount.
	RefundID string
	Reason   string
}

// RefundTo refunds the sale up to CumulativeCents: in the transaction that
// locks the sale, the part not yet refunded (CumulativeCents minus the
// sale's refunded total, whichever refunds raised it: ProcessorRefund or
// Refund of a processor refund id, the refund route, an earlier RefundTo,
// a lost dispute) is applied
// exactly as Refund applies an amount, with RefundID. Nothing left to apply
// (the part is 0 or less) is skipped, "refund already applied", and writes
// nothing. So a refund.created applied by Refund and a later charge.refunded
// whose cumulative includes it apply that refund once, and concurrent or
// redelivered calls with one cumulative apply it once.
func (s *Service) RefundTo(ctx context.Context, in RefundToInput) (RefundResult, error) {
	if in.TransactionID == "" || in.RefundID == "" || in.CumulativeCents < 0 {
		return RefundResult{}, fmt.Errorf("%w: refund of %q to %d (refund id %q)", ErrInvalidInput, in.TransactionID, in.CumulativeCents, in.RefundID)
	}
	now := s.now().UTC()
	var res RefundResult
	err := s.store.Atomic(ctx, func(tx Tx) error {
		res = RefundResult{}
		sale, err := tx.LockSaleByTransaction(ctx, in.ProgramID, in.TransactionID)
		if err != nil {
			return err
		}
		part := in.CumulativeCents - sale.RefundedCents
		if part > 0 {
			ref := RefundInput{ProgramID: in.ProgramID, TransactionID: in.TransactionID, AmountCents: part, RefundID: in.RefundID, Reason: in.Reason}
			return s.refundLocked(ctx, tx, sale, ref, in.RefundID, now, &res)
		}
		return s.alreadyApplied(ctx, tx, sale, &res)
	})
	if err != nil {
		return RefundResult{}, err
	}
	s.refunded(ctx, res)
	return res, nil
}

// ProcessorRefundInput is one refund of the processor (refund.created or
// refund.updated with status succeeded).
type ProcessorRefundInput struct {
	ProgramID     int64
	TransactionID string
	// RefundID is the processor's refund id (re_…), required.
	RefundID string
	// AmountCents is this refund's own amount (positive).
	AmountCents int64
	Reason      string
}

// ProcessorRefund applies a processor refund, whichever of its events
// arrives first: its own (this call) or a charge.refunded whose cumulative
// includes it (RefundTo). In the transaction that locks the sale, the
// refund's id and amount are recorded once (a refund id seen before is
// skipped, "refund already applied", writing nothing); the processor's
// refunds of the sale then add up to a lower bound of its cumulative
// refunded amount, as every charge.refunded's is. What this raises above
// the sale's refunded total is applied, as Refund applies an amount, with
// RefundID; nothing (a charge.refunded counted it already) is skipped,
// "refund already applied", with only the id recorded. So no refund is
// applied twice, and once every event has arrived the sale is refunded
// exactly the processor's total.
func (s *Service) ProcessorRefund(ctx context.Context, in ProcessorRefundInput) (RefundResult, error) {
	if in.TransactionID == "" || in.RefundID == "" || in.AmountCents <= 0 {
		return RefundResult{}, fmt.Errorf("%w: processor refund %q of %q for %d", ErrInvalidInput, in.RefundID, in.TransactionID, in.AmountCents)
	}
	now := s.now().UTC()
	var res RefundResult
	err := s.store.Atomic(ctx, func(tx Tx) error {
		res = RefundResult{}
		sale, err := tx.LockSaleByTransaction(ctx, in.ProgramID, in.TransactionID)
		if err != nil {
			return err
		}
		total, seen, err := tx.ProcessorRefunds(ctx, sale.ID, in.RefundID)
		if err != nil {
			return err
		}
		if seen {
			return s.alreadyApplied(ctx, tx, sale, &res)
		}
		if err := tx.RecordProcessorRefund(ctx, sale.ID, in.RefundID, in.AmountCents, now); err != nil {
			return err
		}
		part := total + in.AmountCents - sale.RefundedCents
		if part <= 0 {
			return s.alreadyApplied(ctx, tx, sale, &res)
		}
		ref := RefundInput{ProgramID: in.ProgramID, TransactionID: in.TransactionID, AmountCents: min(part, in.AmountCents), RefundID: in.RefundID, Reason: in.Reason}
		return s.refundLocked(ctx, tx, sale, ref, in.RefundID, now, &res)
	})
	if err != nil {
		return RefundResult{}, err
	}
	s.refunded(ctx, res)
	return res, nil
}

// alreadyApplied answers a refund of a locked sale that applies nothing:
// skipped, "refund already applied" (no_commission without commission).
func (s *Service) alreadyApplied(ctx context.Context, tx Tx, sale Sale, res *RefundResult) error {
	res.SaleID = sale.ID
	res.Outcome, res.SkipReason = string(money.OutcomeSkipped), SkipAlreadyApplied
	c, ok, err := tx.SaleCommission(ctx, sale.ID)
	if err != nil {
		return err
	}
	if !ok {
		res.Outcome, res.SkipReason = OutcomeNoCommission, ""
		return nil
	}
	res.CommissionID = c.ID
	res.Deduction = money.Amount{Currency: c.Amount.Currency}
	res.Debit = res.Deduction
	return nil
}
