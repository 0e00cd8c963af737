package ledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/pg"
)

// ErrUnsupportedCurrency: a sale or withdrawal currency other than USD, EUR
// and VND (the sale route's 422).
var ErrUnsupportedCurrency = fmt.Errorf("unsupported currency: %w", errkind.Unprocessable)

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
	// OnCompletionGroup, when set, is told how many CompleteSale calls
	// each transaction completed and its error (nil: committed): metrics.
	OnCompletionGroup func(calls int, err error)
	// OnRefundGroup: the same for Refund calls.
	OnRefundGroup func(calls int, err error)
}

// Service is the ledger's use cases.
type Service struct {
	store         Store
	now           func() time.Time
	batch         int
	onRefund      func(string)
	onNotifyError func(error)
	// completions and refunds commit concurrent CompleteSale and Refund
	// calls together.
	completions *pg.Group[completion, completed]
	refunds     *pg.Group[RefundInput, RefundResult]
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
	s := &Service{store: cfg.Store, now: cfg.Now, batch: cfg.ApproveBatch, onRefund: onRefund, onNotifyError: onNotifyError}
	s.completions = pg.NewGroup(s.completeSales, pg.GroupOptions[completion]{Key: completionKey, Observe: cfg.OnCompletionGroup})
	s.refunds = pg.NewGroup(s.refundGroup, pg.GroupOptions[RefundInput]{Key: refundKey, Observe: cfg.OnRefundGroup})
	return s, nil
}
