// Package readiness answers one question a brand's deploy script can
// check: is this program's integration wired end to end? The checks, in
// order: the key, the tracker (clicks seen), signups (leads seen), payment
// tracking (processor connected or s2s), sales seen, and event freshness.
// Pure: the caller reads the figures, Evaluate decides.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Check statuses. Ready needs every required check "pass"; "warn" is a
// check that does not block readiness (no sale yet, no recent event).
const (
	Pass = "pass"
	Fail = "fail"
	Warn = "warn"
)

// Check names, in the order answered.
const (
	CheckKey       = "api_key"
	CheckTracker   = "tracker"
	CheckLeads     = "leads"
	CheckPayments  = "payment_tracking"
	CheckSales     = "sales"
	CheckFreshness = "event_freshness"
)

// StaleAfter is how long without any event (click, lead or sale, test or
// real) makes the freshness check warn: a live integration sees traffic
// every day.
const StaleAfter = 24 * time.Hour

// Inputs are what the checks read, for the key's program.
type Inputs struct {
	// TestKey: the request's key is a test key (test events are what a
	// test key can produce, so they count for it).
	TestKey bool
	// Clicks, Leads, Sales: events seen (test and real).
	Clicks, Leads, Sales int64
	// LastEvent: the latest event of any kind (zero: none).
	LastEvent time.Time
	// PaymentTrackingMode: processor_connect or s2s.
	PaymentTrackingMode string
	// ProcessorStatus: the processor connection's raw status.
	ProcessorStatus string
	Now             time.Time
}

// Check is one line of the answer.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// Readiness is the answer: ready when every required check passes.
type Readiness struct {
	Ready  bool    `json:"ready"`
	Checks []Check `json:"checks"`
}

// Evaluate runs the checks.
func Evaluate(in Inputs) Readiness {
	kind := "live"
	if in.TestKey {
		kind = "test"
	}
	checks := []Check{
		{CheckKey, Pass, fmt.Sprintf("The %s API key is valid.", kind)},
		seen(CheckTracker, in.Clicks, Fail, "click", "No click recorded yet: add the tracker to your site and open one of your referral links."),
		seen(CheckLeads, in.Leads, Fail, "lead", "No signup recorded yet: call svc.lead() in the browser or POST /api/v1/track/lead from your server when a referred visitor signs up."),
		payments(in),
		seen(CheckSales, in.Sales, Warn, "sale", "No sale recorded yet: sales appear once a referred customer pays."),
		freshness(in),
	}
	ready := true
	for _, c := range checks {
		if c.Status == Fail {
			ready = false
		}
	}
	return Readiness{Ready: ready, Checks: checks}
}

func seen(name string, n int64, missing, noun, hint string) Check {
	if n <= 0 {
		return Check{name, missing, hint}
	}
	plural := "s"
	if n == 1 {
		plural = ""
	}
	return Check{name, Pass, fmt.Sprintf("%d %s%s recorded.", n, noun, plural)}
}

func payments(in Inputs) Check {
	switch {
	case in.PaymentTrackingMode == "s2s":
		return Check{CheckPayments, Pass, "Your server reports sales (paymentTrackingMode s2s) with POST /api/v1/track/sale."}
	case in.ProcessorStatus == "connected":
		return Check{CheckPayments, Pass, "The payment processor is connected: its payments record sales."}
	}
	status := in.ProcessorStatus
	if status == "" {
		status = "not_connected"
	}
	return Check{CheckPayments, Fail, fmt.Sprintf("Payment processor %s: connect it, or set paymentTrackingMode to s2s and report sales from your server.", status)}
}

func freshness(in Inputs) Check {
	if in.LastEvent.IsZero() {
		return Check{CheckFreshness, Warn, "No event received yet."}
	}
	age := in.Now.Sub(in.LastEvent)
	if age < 0 {
		age = 0
	}
	at := in.LastEvent.UTC().Format(time.RFC3339)
	if age > StaleAfter {
		return Check{CheckFreshness, Warn, fmt.Sprintf("The latest event was at %s, more than 24 hours ago.", at)}
	}
	return Check{CheckFreshness, Pass, fmt.Sprintf("The latest event was at %s.", at)}
}

// Facts are what a program's checks read (the Store's answer).
type Facts struct {
	Clicks, Leads, Sales int64
	LastEvent            time.Time
	PaymentTrackingMode  string
	ProcessorStatus      string
}

// Store reads a program's facts from the replica and the aggregates.
type Store interface {
	Facts(ctx context.Context, programID int64) (Facts, error)
}

// Service answers readiness for the key's program.
type Service struct {
	store Store
	now   func() time.Time
}

// NewService builds the Service; store and now are required.
func NewService(store Store, now func() time.Time) (*Service, error) {
	if store == nil || now == nil {
		return nil, errors.New("readiness: store and clock are required")
	}
	return &Service{store: store, now: now}, nil
}

// Check evaluates the program of the request's key (testKey: a test key).
func (s *Service) Check(ctx context.Context, programID int64, testKey bool) (Readiness, error) {
	f, err := s.store.Facts(ctx, programID)
	if err != nil {
		return Readiness{}, err
	}
	return Evaluate(Inputs{
		TestKey: testKey, Clicks: f.Clicks, Leads: f.Leads, Sales: f.Sales, LastEvent: f.LastEvent,
		PaymentTrackingMode: f.PaymentTrackingMode, ProcessorStatus: f.ProcessorStatus, Now: s.now(),
	}), nil
}
