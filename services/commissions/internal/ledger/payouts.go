package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/svc-dev/svc/services/commissions/internal/money"
)

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

// commissionsPaid tells which of its program's commissions paying the
// program payout w covered: the program's paid payouts to the partner (in
// w's currency) cover the partner's credited commissions of that program
// oldest first, net of refunds (money.PaidOut), and those covered once w
// is paid and not before (paidBefore) are told, each with something left
// to pay. Only the program's own payouts count: another brand paying the
// same partner never tells this program its commissions were paid. A
// withdrawal the operator opened for the partner as a whole (program 0)
// tells no program, as its payout.paid does not.
func (s *Service) commissionsPaid(ctx context.Context, tx Tx, w Withdrawal, paidBefore int64, now time.Time) error {
	if w.ProgramID == 0 {
		return nil
	}
	list, err := tx.ProgramCreditedCommissions(ctx, w.ProgramID, w.PartnerID, w.Amount.Currency)
	if err != nil {
		return err
	}
	nets := make([]money.Amount, len(list))
	for i, c := range list {
		nets[i] = c.Net()
	}
	covered := func(paid int64) (int, error) {
		n, err := money.PaidOut(nets, money.Amount{Minor: paid, Currency: w.Amount.Currency})
		if err != nil {
			return 0, internal(fmt.Sprintf("paid out of partner %d in program %d", w.PartnerID, w.ProgramID), err)
		}
		return n, nil
	}
	from, err := covered(paidBefore)
	if err != nil {
		return err
	}
	to, err := covered(paidBefore + w.Amount.Minor)
	if err != nil {
		return err
	}
	for i := from; i < to; i++ {
		if nets[i].Minor > 0 {
			if err := tx.CommissionPaid(ctx, list[i], w, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// fitWithdrawals shrinks open withdrawals, newest first, after a refund of
// c took money back from the partner's balance, now bal
// (money.FitWithdrawals). A program pays its own payouts: only c's
// program's payouts shrink, to what that program still owes the partner
// (its earned less paid, program_money, this refund's deduction
// included). Another program's payouts are never touched, however short
// the partner's whole balance: one brand's clawback is not another
// brand's to bear. The operator's program-less withdrawals shrink to what
// the balance leaves after the programs' open payouts.
func (s *Service) fitWithdrawals(ctx context.Context, tx Tx, c Commission, bal money.Amount, now time.Time) error {
	open, err := tx.OpenWithdrawals(ctx, c.PartnerID, bal.Currency)
	if err != nil {
		return err
	}
	var own, operator []Withdrawal
	var programsOpen int64
	for _, w := range open {
		switch w.ProgramID {
		case 0:
			operator = append(operator, w)
		case c.ProgramID:
			own = append(own, w)
			programsOpen += w.Amount.Minor
		default:
			programsOpen += w.Amount.Minor
		}
	}
	if len(own) > 0 {
		f, err := tx.ProgramFunds(ctx, c.ProgramID, c.PartnerID, bal.Currency)
		if err != nil {
			return err
		}
		cut, err := s.shrinkWithdrawals(ctx, tx, own, money.Amount{Minor: f.Balance(), Currency: bal.Currency}, now)
		if err != nil {
			return err
		}
		programsOpen -= cut
	}
	if len(operator) == 0 {
		return nil
	}
	_, err = s.shrinkWithdrawals(ctx, tx, operator, money.Amount{Minor: bal.Minor - programsOpen, Currency: bal.Currency}, now)
	return err
}

// shrinkWithdrawals reduces open withdrawals (oldest first), newest first,
// until their total is at most max(limit, 0), cancelling those reduced to
// nothing; cut is how much they lost.
func (s *Service) shrinkWithdrawals(ctx context.Context, tx Tx, open []Withdrawal, limit money.Amount, now time.Time) (cut int64, err error) {
	ws := make([]money.Withdrawal, len(open))
	byID := make(map[int64]Withdrawal, len(open))
	for i, w := range open {
		ws[i] = money.Withdrawal{ID: w.ID, Amount: w.Amount}
		byID[w.ID] = w
	}
	changes, err := money.FitWithdrawals(limit, ws)
	if err != nil {
		return 0, internal(fmt.Sprintf("fit withdrawals of partner %d", open[0].PartnerID), err)
	}
	for _, ch := range changes {
		w := byID[ch.ID]
		cut += ch.From.Minor - ch.To.Minor
		w.Amount, w.UpdatedAt = ch.To, now
		change := WithdrawalReduced
		if ch.Cancelled {
			w.Status, change = WithdrawalCancelled, WithdrawalDropped
		}
		if err := tx.UpdateWithdrawal(ctx, w, change); err != nil {
			return 0, err
		}
	}
	return cut, nil
}

// Balances lists the partner's balances, one per currency.
func (s *Service) Balances(ctx context.Context, partnerID int64) ([]Balance, error) {
	return s.store.Balances(ctx, partnerID)
}

// OpenWithdrawal opens a withdrawal of amount minor units of currency (0:
// all that is available). Available is the balance minus the open
// withdrawals; more than that, or nothing, is ErrInvalidAmount.
func (s *Service) OpenWithdrawal(ctx context.Context, partnerID int64, currency string, amount int64) (Withdrawal, error) {
	return s.openWithdrawal(ctx, 0, partnerID, currency, amount)
}

// OpenProgramWithdrawal opens a payout of a partner's money earned in one
// program (the console's payouts): what is available is the program's
// balance (ProgramFunds) minus its open payouts (ProgramAvailable), whatever
// the partner's balance in other programs. Same amounts and messages as
// OpenWithdrawal.
func (s *Service) OpenProgramWithdrawal(ctx context.Context, programID, partnerID int64, currency string, amount int64) (Withdrawal, error) {
	if programID <= 0 {
		return Withdrawal{}, fmt.Errorf("%w: program %d", ErrInvalidInput, programID)
	}
	return s.openWithdrawal(ctx, programID, partnerID, currency, amount)
}

func (s *Service) openWithdrawal(ctx context.Context, programID, partnerID int64, currency string, amount int64) (Withdrawal, error) {
	cur, err := money.ParseCurrency(currency)
	if err != nil {
		// Not err's text: it repeats the sentinel's words, and the
		// console answers this error's text (422).
		return Withdrawal{}, fmt.Errorf("%w: %q (supported: USD, EUR, VND)", ErrUnsupportedCurrency, currency)
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
		if programID != 0 {
			f, err := tx.ProgramFunds(ctx, programID, partnerID, cur)
			if err != nil {
				return err
			}
			avail = ProgramAvailable(f)
		}
		want := amount
		if want == 0 {
			want = avail
		}
		if want <= 0 || want > avail {
			return fmt.Errorf("%w: %s requested, %s available", ErrInvalidAmount,
				money.Amount{Minor: want, Currency: cur}, money.Amount{Minor: avail, Currency: cur})
		}
		w = Withdrawal{
			PartnerID: partnerID, ProgramID: programID, Amount: money.Amount{Minor: want, Currency: cur}, Requested: want,
			Status: WithdrawalOpen, CreatedAt: now, UpdatedAt: now,
		}
		return tx.InsertWithdrawal(ctx, &w)
	})
	if err != nil {
		return Withdrawal{}, err
	}
	return w, nil
}

// ProgramAvailable is what a program's payout may take: the program's
// balance minus its open payouts, never negative. Not capped by the
// partner's whole balance: a partner in debt to another brand (that brand
// paid out, then took a refund back) is still owed what this program's
// commissions earned.
func ProgramAvailable(f ProgramFunds) int64 {
	return max(f.Balance()-f.Open, 0)
}

// PayWithdrawal marks an open withdrawal paid and takes its amount from the
// balance (a withdrawal journal entry).
func (s *Service) PayWithdrawal(ctx context.Context, id int64) (Withdrawal, error) {
	return s.closeWithdrawal(ctx, 0, id, WithdrawalPaid, "")
}

// CancelWithdrawal cancels an open withdrawal; the balance is unchanged.
func (s *Service) CancelWithdrawal(ctx context.Context, id int64) (Withdrawal, error) {
	return s.closeWithdrawal(ctx, 0, id, WithdrawalCancelled, "")
}

// PayProgramWithdrawal pays a payout of the program, keeping the
// transfer's external reference; a withdrawal of another program (or an
// admin one) is ErrWithdrawalNotFound and is left alone.
func (s *Service) PayProgramWithdrawal(ctx context.Context, programID, id int64, reference string) (Withdrawal, error) {
	return s.closeWithdrawal(ctx, programID, id, WithdrawalPaid, reference)
}

// CancelProgramWithdrawal cancels a payout of the program, as
// PayProgramWithdrawal scopes it.
func (s *Service) CancelProgramWithdrawal(ctx context.Context, programID, id int64) (Withdrawal, error) {
	return s.closeWithdrawal(ctx, programID, id, WithdrawalCancelled, "")
}

// closeWithdrawal pays or cancels; programID 0 is the admin API (any
// withdrawal), otherwise only the program's own.
func (s *Service) closeWithdrawal(ctx context.Context, programID, id int64, status, reference string) (Withdrawal, error) {
	now := s.now().UTC()
	var w Withdrawal
	err := s.store.Atomic(ctx, func(tx Tx) error {
		var err error
		if w, err = tx.LockWithdrawal(ctx, id); err != nil {
			return err
		}
		if programID != 0 && w.ProgramID != programID {
			return fmt.Errorf("withdrawal %d of program %d: %w", id, programID, ErrWithdrawalNotFound)
		}
		if w.Status != WithdrawalOpen {
			return fmt.Errorf("withdrawal %d is %s: %w", id, w.Status, ErrWithdrawalNotOpen)
		}
		w.Status, w.UpdatedAt = status, now
		if reference != "" {
			w.Reference = reference
		}
		if status != WithdrawalPaid {
			return tx.UpdateWithdrawal(ctx, w, WithdrawalDropped)
		}
		// The balance's lock orders this payment after any other of the
		// partner's (the withdrawal's lock is the withdrawal's only), so the
		// program's total paid before it is read whole and each commission
		// is told paid once.
		if _, err := tx.LockBalance(ctx, w.PartnerID, w.Amount.Currency); err != nil {
			return err
		}
		var before ProgramFunds
		if w.ProgramID != 0 {
			if before, err = tx.ProgramFunds(ctx, w.ProgramID, w.PartnerID, w.Amount.Currency); err != nil {
				return err
			}
		}
		if err := tx.UpdateWithdrawal(ctx, w, WithdrawalPaidOut); err != nil {
			return err
		}
		if _, err = tx.PostEntry(ctx, Entry{
			PartnerID: w.PartnerID, Delta: money.Amount{Minor: -w.Amount.Minor, Currency: w.Amount.Currency},
			Kind: EntryWithdrawal, WithdrawalID: w.ID, ProgramID: w.ProgramID, At: now,
		}); err != nil {
			return err
		}
		return s.commissionsPaid(ctx, tx, w, before.Paid, now)
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
