package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/services/commissions/internal/money"
)

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
	// ProgramID is the sale's program when the caller knows it (0: read
	// from the sale): the store then reads the commission's inputs in the
	// same round trip as the completion.
	ProgramID       int64
	CustomerID      int64
	CustomerClickID string
	// PartnerID 0: no partner (the sale is stored without commission).
	PartnerID int64
}

// CompleteSale records a reserved sale as attributed to who and decides
// its commission, with their events, in one transaction: RecordSale's
// result and errors. A sale completed before (by the backstop, or a
// concurrent call) is answered as it stands; one released before is
// ErrSaleNotFound. Concurrent completions share their transaction
// (completeSales).
func (s *Service) CompleteSale(ctx context.Context, saleID int64, who Attributed) (SaleResult, error) {
	out, err := s.completions.Do(ctx, completion{saleID: saleID, who: who})
	if err != nil {
		return SaleResult{}, err
	}
	if out.cause != nil {
		return out.res, &CommissionNotCreatedError{SaleID: out.res.Sale.ID, Cause: out.cause}
	}
	return out.res, nil
}

// completion is a CompleteSale call, and completed its answer.
type (
	completion struct {
		saleID int64
		who    Attributed
	}
	completed struct {
		res   SaleResult
		cause error
	}
)

// completionKey keeps two completions of one customer out of one
// transaction: the second decides on a history the first writes.
func completionKey(c completion) string {
	if c.who.ProgramID == 0 || c.who.CustomerID == 0 {
		return "sale:" + strconv.FormatInt(c.saleID, 10)
	}
	return strconv.FormatInt(c.who.ProgramID, 10) + ":" + strconv.FormatInt(c.who.CustomerID, 10)
}

// completeSales completes a group of reserved sales in one transaction,
// each as it would be alone (their customers differ). They run in the
// order of their customers, so two groups take the customers' locks in
// one order and never wait on each other in a cycle.
func (s *Service) completeSales(ctx context.Context, calls []completion) ([]pg.GroupResult[completed], error) {
	order := make([]int, len(calls))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := calls[a].who, calls[b].who
		return cmp.Or(cmp.Compare(x.ProgramID, y.ProgramID), cmp.Compare(x.CustomerID, y.CustomerID), cmp.Compare(calls[a].saleID, calls[b].saleID))
	})
	for k := 1; k < len(order); k++ {
		if a, b := calls[order[k-1]], calls[order[k]]; a.who.CustomerID != 0 && completionKey(a) == completionKey(b) {
			// The second would decide on a history without the first's
			// commission (its writes go with the commit): run each alone.
			return nil, errSameCustomer
		}
	}
	var out []pg.GroupResult[completed]
	err := s.store.Atomic(ctx, func(tx Tx) error {
		out = make([]pg.GroupResult[completed], len(calls))
		var ahead []Sale
		for _, i := range order {
			if w := calls[i].who; w.ProgramID != 0 && w.CustomerID != 0 {
				ahead = append(ahead, Sale{ID: calls[i].saleID, ProgramID: w.ProgramID, CustomerID: w.CustomerID})
			}
		}
		if len(ahead) > 1 {
			if err := tx.ReadAheadCompletions(ctx, ahead); err != nil {
				return err
			}
		}
		for _, i := range order {
			res, cause, err := s.completeSale(ctx, tx, calls[i].saleID, calls[i].who)
			if err != nil {
				return err
			}
			out[i].Out = completed{res: res, cause: cause}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// errSameCustomer fails a group of completions naming one customer twice
// (the group's Key keeps them apart): each then runs alone.
var errSameCustomer = errors.New("two completions of one customer in one transaction")

// completeSale is one completion in tx: the sale recorded with its
// decision, or a sale completed before answered as it stands.
func (s *Service) completeSale(ctx context.Context, tx Tx, saleID int64, who Attributed) (SaleResult, error, error) {
	sale := Sale{ID: saleID, ProgramID: who.ProgramID, CustomerID: who.CustomerID, CustomerClickID: who.CustomerClickID, PartnerID: who.PartnerID}
	err := tx.CompleteSale(ctx, &sale)
	if err == nil {
		return s.decideSale(ctx, tx, sale, s.now().UTC())
	}
	if !errors.Is(err, ErrSaleNotFound) {
		return SaleResult{}, nil, err
	}
	// Completed (or released) before: answer the sale as it stands.
	sale, err = tx.LockSale(ctx, saleID)
	if err != nil {
		return SaleResult{}, nil, err
	}
	if sale.Reserved {
		return SaleResult{}, nil, fmt.Errorf("sale %d stayed reserved: %w", saleID, errkind.Internal)
	}
	res := SaleResult{Sale: sale, NoCommission: sale.CommissionState}
	if c, ok, err := tx.SaleCommission(ctx, sale.ID); err != nil {
		return SaleResult{}, nil, err
	} else if ok {
		res.Commission, res.NoCommission = &c, ""
	}
	return res, nil, nil
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
