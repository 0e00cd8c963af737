// Package events turns the platform's Kafka events into webhook events:
// which webhook events (zero or more) one envelope of tracking's, the
// ledger's or the catalog's topic means, with the body every endpoint of
// the program receives byte for byte. It is pure: the writer
// (events/pgstore) stores what it answers and fans it out into deliveries,
// and the consumers (events/consumer) feed it.
package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Webhook event types (v1). An endpoint lists the ones it receives;
// click.recorded only when named, being the high-volume one.
const (
	TypeLeadCreated        = "lead.created"
	TypeSaleCreated        = "sale.created"
	TypeSaleRefunded       = "sale.refunded"
	TypeCommissionCreated  = "commission.created"
	TypeCommissionApproved = "commission.approved"
	TypeCommissionReversed = "commission.reversed"
	TypeCommissionPaid     = "commission.paid"
	TypePartnerEnrolled    = "partner.enrolled"
	TypePayoutPaid         = "payout.paid"
	TypeClickRecorded      = "click.recorded"
	// TypePing is the test route's event (endpoint API), delivered to that
	// one endpoint only; listed here so the OpenAPI test covers its body.
	TypePing = "ping"
)

// Types lists every event type an endpoint may subscribe to, in the
// contract's order.
func Types() []string {
	return []string{TypeLeadCreated, TypeSaleCreated, TypeSaleRefunded, TypeCommissionCreated, TypeCommissionApproved,
		TypeCommissionReversed, TypeCommissionPaid, TypePartnerEnrolled, TypePayoutPaid, TypeClickRecorded}
}

// Event is one webhook event to store and deliver.
type Event struct {
	// ID is "evt_" and 32 hex digits, derived from the source envelope's
	// id and the type (EventID): a replayed envelope gives the same id.
	ID        string
	Type      string
	ProgramID int64
	// IsTest: a test event or test-mode sale, delivered only to endpoints
	// with include_test.
	IsTest bool
	// ObjectKey names the object ('commission:12'): one endpoint receives
	// one object's events in the order they were written.
	ObjectKey string
	CreatedAt time.Time
	// Data is the object as it is after the change (a struct of this
	// package, marshalled in field order).
	Data any
}

// EventID is the webhook event id of the event of type typ that the
// envelope sourceID causes: deterministic, so a replay of the envelope
// (a redelivery the inbox has forgotten, a dead letter replayed) writes
// the same id and the writer's ON CONFLICT makes it a no-op.
func EventID(sourceID, typ string) string {
	sum := sha256.Sum256([]byte(sourceID + "\x00" + typ))
	return "evt_" + hex.EncodeToString(sum[:16])
}

// TimeFormat is the body's time format: RFC 3339 in UTC with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Time is a time in the body's format.
type Time time.Time

// MarshalJSON writes t as RFC 3339 UTC with milliseconds.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Time(t).UTC().Format(TimeFormat))), nil
}

// body is the JSON every endpoint receives, in this key order.
type body struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedAt Time   `json:"created_at"`
	ProgramID int64  `json:"program_id"`
	Data      any    `json:"data"`
}

// Body is the exact bytes signed and sent:
// {"id","type","created_at","program_id","data"}.
func (e Event) Body() ([]byte, error) {
	// Without HTML escaping: URLs in the data (page_url) keep their & as
	// the receiver would write them.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body{ID: e.ID, Type: e.Type, CreatedAt: Time(e.CreatedAt), ProgramID: e.ProgramID, Data: e.Data}); err != nil {
		return nil, fmt.Errorf("body of %s %s: %w", e.Type, e.ID, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// SaleID is the sale a sale.created or sale.refunded event is about (0
// for other types): the writer keeps test sales' ids, and marks the
// refunds of test sales as test events.
func (e Event) SaleID() int64 {
	switch d := e.Data.(type) {
	case Sale:
		return d.ID
	case SaleRefunded:
		return d.ID
	}
	return 0
}

func key(kind string, id any) string { return fmt.Sprintf("%s:%v", kind, id) }
