// Package delivery sends webhook events to brands' endpoints: it claims due
// deliveries from the Store, signs each body the Standard Webhooks way,
// posts it with the Sender and records the outcome, retrying with backoff
// for MaxAge and disabling an endpoint that fails everything for
// DisableAfter.
//
// At least once: a delivery is claimed by pushing its next_attempt_at past
// the attempt's timeout (a lease) in the claim's transaction, so an attempt
// cut short by a crash is made again when the lease ends. One endpoint never
// delays another: each endpoint has its own share of the workers
// (EndpointConcurrency) and an endpoint whose share is taken is left out of
// the claim.
package delivery

import (
	"context"
	"time"
)

// Claimed is one delivery taken for an attempt, with what the attempt needs.
type Claimed struct {
	ID         int64
	EndpointID int64
	ProgramID  int64
	URL        string
	// Attempt is the attempt's number (1 on the first): the claim counted
	// it. The outcome is recorded only while the delivery still has it, so
	// a late outcome never overwrites a newer attempt's.
	Attempt int
	// CreatedAt is the delivery's creation: retries stop MaxAge after it.
	CreatedAt time.Time

	EventID        string
	EventType      string
	EventCreatedAt time.Time
	Body           []byte
	// Secrets are the endpoint's unexpired sealed secrets, newest first.
	Secrets [][]byte
}

// ClaimRequest says what to claim.
type ClaimRequest struct {
	// Now is the claim's time: due deliveries have next_attempt_at <= Now.
	Now time.Time
	// LeaseUntil becomes the claimed deliveries' next_attempt_at.
	LeaseUntil time.Time
	// Limit is the most deliveries to claim in all.
	Limit int
	// Free is the number of attempts each endpoint may still start: an
	// endpoint absent from it may start PerEndpoint, one at zero is left
	// out of the claim altogether.
	Free        map[int64]int
	PerEndpoint int
}

// Outcome is what one attempt came to, to be recorded.
type Outcome struct {
	DeliveryID int64
	EndpointID int64
	Attempt    int
	Now        time.Time

	// Delivered: the endpoint answered 2xx.
	Delivered bool
	// Failed: retries are over (MaxAge passed), the delivery is final.
	Failed bool
	// NextAttemptAt is when to try again (neither Delivered nor Failed).
	NextAttemptAt time.Time

	// Status is the HTTP status, 0 when there was no response.
	Status   int
	Error    string
	Duration time.Duration

	// EndpointFault says the endpoint is to blame (a response that was not
	// 2xx, no answer): it starts or continues the endpoint's failing run.
	// False when the attempt could not be made for a reason of ours (a
	// secret that does not open).
	EndpointFault bool
	// DisableBefore: an endpoint failing since this time or earlier is
	// disabled, and its program notified.
	DisableBefore time.Time
}

// Recorded is what recording an outcome changed.
type Recorded struct {
	// Disabled: the endpoint was disabled by this outcome.
	Disabled bool
}

// Pending is the depth of the queues, for the gauges.
type Pending struct {
	// Total pending deliveries of enabled endpoints.
	Total int64
	// MaxEndpoint is the longest one endpoint's queue.
	MaxEndpoint int64
}

// Store keeps deliveries.
type Store interface {
	// Claim takes due deliveries of enabled endpoints, soonest first,
	// none while an earlier delivery of the same object to the same
	// endpoint is pending, at most Free (or PerEndpoint) per endpoint, and
	// leases them in one transaction.
	Claim(ctx context.Context, req ClaimRequest) ([]Claimed, error)
	// Record records an attempt's outcome, and the endpoint's failing run.
	Record(ctx context.Context, o Outcome) (Recorded, error)
	// Pending reads the queue depth.
	Pending(ctx context.Context) (Pending, error)
}

// Opener opens a sealed secret of an endpoint (secret.Box).
type Opener interface {
	Open(sealed []byte, endpointID int64) (string, error)
}
