package events

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Values of the source events this package reads.
const (
	leadSettled           = "settled"
	commissionApproved    = "approved"
	commissionRefunded    = "refunded"
	commissionReversed    = "reversed"
	commissionKindSale    = "sale"
	commissionKindLead    = "lead"
	balanceKindWithdrawal = "withdrawal"
	payoutStatusPaid      = "paid"
)

// Map answers the webhook events an envelope of tracking's or the
// ledger's topic causes (none for most). now is the creation time of an
// event whose envelope has no occurred_at; every other event is created at
// its envelope's occurred_at, the time the producing service committed the
// change. A payload that does not decode is an error (the inbox retries,
// then dead-letters it).
//
//	tracking.lead.recorded (settled)          lead.created
//	tracking.click.recorded                   click.recorded
//	commissions.sale.recorded                 sale.created
//	commissions.refund.recorded               sale.refunded
//	commissions.commission.created            commission.created (+ commission.approved when created approved)
//	commissions.commission.status_changed     commission.approved / commission.reversed
//	commissions.commission.paid               commission.paid
//	commissions.balance.changed (a program
//	  payout's withdrawal entry)              payout.paid
//
// tracking.sale.recorded is not the sale (the ledger's
// commissions.sale.recorded is: it exists once the ledger stored it).
// commissions.withdrawal.changed "paid" carries no program, so payout.paid
// comes from the balance entry the same payment posts, which does (see
// payout).
func Map(env *eventsv1.Envelope, now time.Time) ([]Event, error) {
	at := now
	if env.GetOccurredAt() != nil {
		at = env.GetOccurredAt().AsTime()
	}
	m := mapper{env: env, at: eventTime(at)}
	switch env.GetType() {
	case eventsv1.TypeLeadRecorded:
		var ev eventsv1.LeadRecorded
		if err := m.decode(&ev); err != nil {
			return nil, err
		}
		return m.lead(&ev), nil
	case eventsv1.TypeClickRecorded:
		var ev eventsv1.ClickRecorded
		if err := m.decode(&ev); err != nil {
			return nil, err
		}
		return m.click(&ev), nil
	case eventsv1.TypeLedgerSaleRecorded:
		var ev eventsv1.LedgerSaleRecorded
		if err := m.decode(&ev); err != nil {
			return nil, err
		}
		return m.sale(&ev), nil
	case eventsv1.TypeRefundRecorded:
		var ev eventsv1.RefundRecorded
		if err := m.decode(&ev); err != nil {
			return nil, err
		}
		return m.refund(&ev), nil
	case eventsv1.TypeCommissionCreated:
		var ev eventsv1.CommissionCreated
		if err := m.decode(&ev); err != nil {
			return nil, err
		}
		return m.commissionCreated(&ev), nil
	case eventsv1.TypeCommissionStatusChanged:
		var ev eventsv1.CommissionStatusChanged
		if err := m.decode(&ev); err != nil {
			return nil, err
		}
		return m.commissionChanged(&ev), nil
	case eventsv1.TypeCommissionPaid:
		var ev eventsv1.CommissionPaid
		if err := m.decode(&ev); err != nil {
			return nil, err
		}
		return m.commissionPaid(&ev), nil
	case eventsv1.TypeBalanceChanged:
		var ev eventsv1.BalanceChanged
		if err := m.decode(&ev); err != nil {
			return nil, err
		}
		return m.payout(&ev), nil
	}
	return nil, nil
}

// Mapped reports whether Map may answer an event for an envelope of this
// type: the consumers acknowledge the others without a transaction.
func Mapped(envType string) bool {
	switch envType {
	case eventsv1.TypeLeadRecorded, eventsv1.TypeClickRecorded, eventsv1.TypeLedgerSaleRecorded, eventsv1.TypeRefundRecorded,
		eventsv1.TypeCommissionCreated, eventsv1.TypeCommissionStatusChanged, eventsv1.TypeCommissionPaid, eventsv1.TypeBalanceChanged:
		return true
	}
	return false
}

type mapper struct {
	env *eventsv1.Envelope
	at  time.Time
}

func (m mapper) decode(msg proto.Message) error {
	if err := proto.Unmarshal(m.env.GetPayload(), msg); err != nil {
		return fmt.Errorf("decode %s %s: %w", m.env.GetType(), m.env.GetId(), err)
	}
	return nil
}

func (m mapper) event(typ string, program int64, test bool, objectKey string, data any) Event {
	return Event{ID: EventID(m.env.GetId(), typ), Type: typ, ProgramID: program, IsTest: test, ObjectKey: objectKey, CreatedAt: m.at, Data: data}
}

func (m mapper) lead(ev *eventsv1.LeadRecorded) []Event {
	if ev.GetStatus() != leadSettled {
		return nil
	}
	// One customer's lead events follow each other; a test lead may have
	// no customer, and is keyed by itself rather than queue behind every
	// other test lead of the program.
	k := key("lead", ev.GetCustomerId())
	if ev.GetCustomerId() == 0 {
		k = key("lead", fmt.Sprintf("e%d", ev.GetEventId()))
	}
	return []Event{m.event(TypeLeadCreated, ev.GetProgramId(), ev.GetIsTest(), k, Lead{
		ID: ev.GetEventId(), CustomerID: id(ev.GetCustomerId()), ClickID: str(ev.GetClickId()), PartnerID: id(ev.GetPartnerId()),
		CustomerKey: str(ev.GetCustomerKey()), EventName: str(ev.GetEventName()), Status: ev.GetStatus(), Test: ev.GetIsTest(),
		CreatedAt: m.time(ev.GetRecordedAt()),
	})}
}

func (m mapper) click(ev *eventsv1.ClickRecorded) []Event {
	return []Event{m.event(TypeClickRecorded, ev.GetProgramId(), ev.GetIsTest(), key("click", ev.GetEventId()), Click{
		ID: ev.GetEventId(), ClickID: str(ev.GetClickId()), CustomerID: id(ev.GetCustomerId()), NewCustomer: ev.GetNewCustomer(),
		LinkID: ev.GetLinkId(), PartnerID: ev.GetPartnerId(), FirstPartnerID: id(ev.GetFirstPartnerId()), Code: ev.GetCode(),
		Country: ev.GetCountry(), Region: ev.GetRegion(), City: ev.GetCity(), DeviceType: ev.GetDeviceType(), OS: ev.GetOs(),
		Browser: ev.GetBrowser(), PageURL: ev.GetPageUrl(), ReferrerURL: ev.GetReferrerUrl(), AffiliateURL: ev.GetAffiliateUrl(),
		Test: ev.GetIsTest(), CreatedAt: m.time(ev.GetClickedAt()),
	})}
}

func (m mapper) sale(ev *eventsv1.LedgerSaleRecorded) []Event {
	return []Event{m.event(TypeSaleCreated, ev.GetProgramId(), ev.GetIsTest(), key("sale", ev.GetSaleId()), Sale{
		ID: ev.GetSaleId(), TransactionID: ev.GetTransactionId(), CustomerID: id(ev.GetCustomerId()), PartnerID: id(ev.GetPartnerId()),
		AmountCents: ev.GetAmountCents(), Currency: ev.GetCurrency(), Source: ev.GetSource(), Test: ev.GetIsTest(),
		OccurredAt: m.time(ev.GetOccurredAt()),
	})}
}

// refund: the ledger's refund event does not say whether the sale was a
// test sale (a refund by transaction id finds a test sale when no live
// one has that id), so the event is live here and the writer marks it test
// when the sale is one of the test sales it has seen (pgstore.Write).
func (m mapper) refund(ev *eventsv1.RefundRecorded) []Event {
	r := Refund{
		ID: ev.GetRefundId(), ExternalRefundID: str(ev.GetExternalRefundId()), RequestedCents: ev.GetRequestedCents(),
		AmountCents: ev.GetAmountCents(), Reason: ev.GetReason(), CreatedAt: m.time(ev.GetCreatedAt()),
	}
	if ev.GetCommissionId() != 0 {
		r.Commission = &RefundCommission{ID: ev.GetCommissionId(), Deduction: ev.GetDeduction(), Debited: ev.GetDebited(), Currency: ev.GetCurrency()}
	}
	return []Event{m.event(TypeSaleRefunded, ev.GetProgramId(), false, key("sale", ev.GetSaleId()), SaleRefunded{
		ID: ev.GetSaleId(), TransactionID: ev.GetTransactionId(), Currency: ev.GetSaleCurrency(), RefundedCents: ev.GetSaleRefundedCents(), Refund: r,
	})}
}

// commissionCreated: a commission created approved (a program without a
// hold period) is approved at creation, with no status change after, so
// it is also commission.approved: an endpoint that listens for approvals
// alone hears of it too.
func (m mapper) commissionCreated(ev *eventsv1.CommissionCreated) []Event {
	c := Commission{
		ID: ev.GetCommissionId(), SaleID: id(ev.GetSaleId()), PartnerID: ev.GetPartnerId(), Kind: ev.GetKind(), Status: ev.GetStatus(),
		Amount: ev.GetAmount(), Currency: ev.GetCurrency(),
	}
	k := key("commission", ev.GetCommissionId())
	created := m.time(ev.GetCreatedAt())
	out := []Event{m.event(TypeCommissionCreated, ev.GetProgramId(), false, k, CommissionCreated{
		Commission: c, CustomerID: id(ev.GetCustomerId()), HoldUntil: m.time(ev.GetHoldUntil()), CreatedAt: created,
	})}
	if ev.GetStatus() == commissionApproved {
		out = append(out, m.event(TypeCommissionApproved, ev.GetProgramId(), false, k, CommissionApproved{Commission: c, ApprovedAt: created}))
	}
	return out
}

// commissionChanged: approval, or a refund or chargeback taking part or
// all of it back. The status event names no kind: a commission without a
// sale is a lead commission.
func (m mapper) commissionChanged(ev *eventsv1.CommissionStatusChanged) []Event {
	kind := commissionKindSale
	if ev.GetSaleId() == 0 {
		kind = commissionKindLead
	}
	c := Commission{
		ID: ev.GetCommissionId(), SaleID: id(ev.GetSaleId()), PartnerID: ev.GetPartnerId(), Kind: kind, Status: ev.GetToStatus(),
		Amount: ev.GetAmount(), Currency: ev.GetCurrency(), RefundedAmount: ev.GetRefundedAmount(),
	}
	k := key("commission", ev.GetCommissionId())
	changed := m.time(ev.GetChangedAt())
	switch ev.GetToStatus() {
	case commissionApproved:
		return []Event{m.event(TypeCommissionApproved, ev.GetProgramId(), false, k, CommissionApproved{Commission: c, ApprovedAt: changed})}
	case commissionRefunded, commissionReversed:
		return []Event{m.event(TypeCommissionReversed, ev.GetProgramId(), false, k, CommissionReversed{
			Commission: c, Deduction: ev.GetDeduction(), Reason: ev.GetReason(), ChangedAt: changed,
		})}
	}
	return nil
}

// commissionPaid: the ledger tells only a program's own payouts (never an
// operator's partner-wide withdrawal), so the payout is the program's.
func (m mapper) commissionPaid(ev *eventsv1.CommissionPaid) []Event {
	return []Event{m.event(TypeCommissionPaid, ev.GetProgramId(), false, key("commission", ev.GetCommissionId()), CommissionPaid{
		Commission: Commission{
			ID: ev.GetCommissionId(), SaleID: id(ev.GetSaleId()), PartnerID: ev.GetPartnerId(), Kind: ev.GetKind(), Status: ev.GetStatus(),
			Amount: ev.GetAmount(), Currency: ev.GetCurrency(), RefundedAmount: ev.GetRefundedAmount(),
		},
		PayoutID: ev.GetWithdrawalId(), PaidAt: m.time(ev.GetPaidAt()),
	})}
}

// payout: paying a withdrawal posts one "withdrawal" entry to the
// partner's balance in the same transaction as its WithdrawalChanged
// "paid", and only then. The entry carries the withdrawal's program (0
// for a withdrawal the admin API opened for the partner as a whole, which
// no program's endpoints are told of) and the amount paid (-delta); the
// withdrawal event carries neither the program nor the envelope key (both
// are keyed 0 so a partner's balance changes keep one order).
func (m mapper) payout(ev *eventsv1.BalanceChanged) []Event {
	if ev.GetKind() != balanceKindWithdrawal || ev.GetProgramId() == 0 || ev.GetWithdrawalId() == 0 {
		return nil
	}
	return []Event{m.event(TypePayoutPaid, ev.GetProgramId(), false, key("payout", ev.GetWithdrawalId()), Payout{
		ID: ev.GetWithdrawalId(), PartnerID: ev.GetPartnerId(), Amount: -ev.GetDelta(), Currency: ev.GetCurrency(),
		Status: payoutStatusPaid, PaidAt: m.time(ev.GetCreatedAt()),
	})}
}

// Enrolment is what the replica knew of a partner-program record before a
// catalog event.
type Enrolment struct {
	Found    bool
	Approved bool
	// Seq is the catalog seq of the snapshot kept.
	Seq int64
	// Test: the partner is the program's `svc test` fixture partner (see
	// FixtureProgram), whether or not the enrolment was found.
	Test bool
}

// Enrolled answers partner.enrolled when the catalog event pp (the
// envelope env) makes the partner approved in the program: the replica had
// no record of the enrolment, or an older unapproved one. A replay or an
// event older than the record kept (seq not above it) changes nothing and
// answers nothing, as the replica's upsert does.
func Enrolled(env *eventsv1.Envelope, pp *eventsv1.PartnerProgram, prev Enrolment, now time.Time) []Event {
	if !pp.GetApproved() {
		return nil
	}
	if prev.Found && (prev.Seq >= env.GetSeq() || prev.Approved) {
		return nil
	}
	at := now
	if env.GetOccurredAt() != nil {
		at = env.GetOccurredAt().AsTime()
	}
	m := mapper{env: env, at: eventTime(at)}
	return []Event{m.event(TypePartnerEnrolled, pp.GetProgramId(), prev.Test, key("partner", pp.GetId()), PartnerEnrolled{
		ID: pp.GetId(), PartnerID: pp.GetPartnerId(), ProgramID: pp.GetProgramId(), Approved: true, Test: prev.Test,
		CreatedAt: m.time(pp.GetCreatedAt()),
	})}
}

// FixtureProgram is the program whose `svc test` fixture partner has this
// address (accounts: test-partner+<program id>@svc.invalid), or 0 for any
// other partner. The fixture's enrolment is a test event.
func FixtureProgram(email string) int64 {
	rest, ok := strings.CutPrefix(email, "test-partner+")
	if !ok {
		return 0
	}
	digits, ok := strings.CutSuffix(rest, "@svc.invalid")
	if !ok || digits == "" || digits[0] == '0' || strings.Trim(digits, "0123456789") != "" {
		return 0
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// eventTime is an event's created_at: UTC, to the millisecond, so the
// events row and the body say the same instant.
func eventTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// time is a source time, or the event's own when the source left it unset.
func (m mapper) time(ts *timestamppb.Timestamp) Time {
	if ts == nil {
		return Time(m.at)
	}
	return Time(ts.AsTime())
}

func id(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
