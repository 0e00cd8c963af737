// Package listen is `svc listen` (issue 22): a brand's developer streams a
// program's events to a server on their own machine. The CLI starts a
// listener (its own signing secret, the program's current position in the
// events table), long-polls the events written since, signs each body with
// the listener's secret as the dispatcher signs deliveries, and posts it
// to the local server; stopping deletes the listener. The caller is a
// signed-in CLI user with tracking:read on the program, or the program's
// own API key. No HTTP or SQL here.
package listen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/webhooks/internal/apierr"
	"github.com/svc-dev/svc/services/webhooks/internal/events"
	"github.com/svc-dev/svc/services/webhooks/internal/secret"
)

// PermissionRead is the membership permission a CLI user needs (the
// console's reading permission).
const PermissionRead = "tracking:read"

// Limits.
const (
	// TTL is how long a listener lives after its creation or last poll:
	// the writer keeps the program's events for it that long, so a CLI
	// killed without a goodbye costs two minutes of event rows.
	TTL = 2 * time.Minute
	// MaxWait is the longest a poll waits for events (seconds), inside the
	// server's write timeout and the CLI's per-call timeout.
	MaxWait = 25
	// MaxEvents is the most events one poll answers; the next poll gets
	// the rest.
	MaxEvents = 100
	// MaxListeners is the live listeners a program may have at once: each
	// one makes the writer keep events and costs a poll a second at most.
	MaxListeners = 10
)

// Error is the service's refusal (apierr: one error table for all its
// routes).
type Error = apierr.Error

// The refusals; access is worded as the console routes word it.
var (
	ErrNoAccess        = &Error{Kind: errkind.Forbidden, Message: "You do not have access to this program"}
	ErrKeyOfOther      = &Error{Kind: errkind.Forbidden, Message: "This API key belongs to another program"}
	ErrProgramNotFound = &Error{Kind: errkind.NotFound, Message: "Program not found"}
	ErrNotFound        = &Error{Kind: errkind.NotFound, Message: "Listener not found in this program (it expires 2 minutes after its last poll); start a new one"}
	ErrTooMany         = &Error{Kind: errkind.Conflict, Message: fmt.Sprintf("A program can have at most %d listeners at once; stop one or wait 2 minutes for an abandoned one to expire", MaxListeners)}
	ErrNoSecretKey     = &Error{Kind: errkind.Unavailable, Message: "Webhook signing is not configured on this server: listeners cannot be started"}
	ErrBadProgram      = &Error{Kind: errkind.Invalid, Field: "id", Message: "id must be a positive whole number"}
	ErrBadListenerID   = &Error{Kind: errkind.Invalid, Field: "listenerId", Message: "listenerId must be a positive whole number"}
	ErrEventsEmpty     = &Error{Kind: errkind.Invalid, Field: "events", Message: "events must list at least one event type (or be left out for all but click.recorded)"}
	ErrAfterRequired   = &Error{Kind: errkind.Invalid, Field: "after", Message: "after is required: the after of the listener's start or of the previous poll"}
	ErrBadAfter        = &Error{Kind: errkind.Invalid, Field: "after", Message: "after must be a whole number, 0 or more"}
	ErrBadWait         = &Error{Kind: errkind.Invalid, Field: "wait", Message: fmt.Sprintf("wait must be a whole number of seconds from 0 to %d", MaxWait)}
)

func errUnknownEvent(v string) *Error {
	return &Error{Kind: errkind.Invalid, Field: "events",
		Message: fmt.Sprintf("Unknown event type: %s. Valid: %s", v, strings.Join(events.Types(), ", "))}
}

// DefaultEvents is what a listener receives when it names no types: every
// v1 type but click.recorded (the high-volume one, only when named, as for
// endpoints).
func DefaultEvents() []string {
	return slices.DeleteFunc(events.Types(), func(t string) bool { return t == events.TypeClickRecorded })
}

// Caller is who asks: a CLI user (UserID) or a program API key
// (KeyProgramID, the key's program), exactly one of them.
type Caller struct {
	UserID       int64
	KeyProgramID int64
}

// Member is a user's membership of a program as the replica has it.
type Member struct {
	Active      bool
	Permissions []string
}

// Listener is a live `svc listen` session.
type Listener struct {
	ID          int64
	ProgramID   int64
	Events      []string
	IncludeTest bool
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// Event is one event as a listener receives it: Body is the exact JSON
// the dispatcher signs and sends.
type Event struct {
	Seq  int64
	ID   string
	Type string
	Body json.RawMessage
}

// Seal seals the new listener's secret for its id, known once the row
// exists.
type Seal func(listenerID int64) ([]byte, error)

// Store is what the service reads and writes. Times come from the caller.
type Store interface {
	Member(ctx context.Context, programID, userID int64) (Member, bool, error)
	ProgramExists(ctx context.Context, programID int64) (bool, error)
	// Create writes the listener with its sealed secret, refusing
	// ErrTooMany when the program has max live ones at l.CreatedAt (its
	// expired ones are deleted on the way), and answers it with the
	// program's highest event seq.
	Create(ctx context.Context, l Listener, seal Seal, max int) (Listener, int64, error)
	// Touch moves a live listener's expiry to expires and answers it;
	// false when the program has no such listener alive at now.
	Touch(ctx context.Context, programID, id int64, now, expires time.Time) (Listener, bool, error)
	// Take removes and answers up to limit events queued for the
	// listener, in seq order.
	Take(ctx context.Context, listenerID int64, limit int) ([]Event, error)
	Delete(ctx context.Context, programID, id int64) (bool, error)
}

// Config is the service's dependencies.
type Config struct {
	Store Store
	// Box seals secrets; nil (no WEBHOOKS_SECRET_KEY): Start answers
	// ErrNoSecretKey.
	Box *secret.Box
	// Now decides expiry (the platform's clock).
	Now func() time.Time
	// PollInterval is how often a waiting poll looks for new events
	// (default 250 ms); the wait itself is real time (Wait).
	PollInterval time.Duration
	// Wait waits d or until ctx ends (default a timer): a poll's wait is
	// the client's real seconds whatever the clock says.
	Wait func(ctx context.Context, d time.Duration) error
}

// Service is `svc listen`'s use cases.
type Service struct {
	cfg Config
}

// DefaultPollInterval is Config.PollInterval's default.
const DefaultPollInterval = 250 * time.Millisecond

// New checks the wiring.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Now == nil {
		return nil, errors.New("listen: store and Now are required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Wait == nil {
		cfg.Wait = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}
	}
	return &Service{cfg: cfg}, nil
}

// Check is the access check alone: the transport runs it before it reports
// a bad request, so an outsider learns nothing from the validation.
func (s *Service) Check(ctx context.Context, c Caller, programID int64) error {
	if programID <= 0 {
		return ErrBadProgram
	}
	if c.KeyProgramID > 0 {
		if c.KeyProgramID != programID {
			return ErrKeyOfOther
		}
		return nil
	}
	if c.UserID <= 0 {
		return ErrNoAccess
	}
	m, ok, err := s.cfg.Store.Member(ctx, programID, c.UserID)
	if err != nil {
		return fmt.Errorf("membership of user %d in program %d: %w", c.UserID, programID, err)
	}
	if ok && m.Active && slices.Contains(m.Permissions, PermissionRead) {
		return nil
	}
	if !ok {
		exists, err := s.cfg.Store.ProgramExists(ctx, programID)
		if err != nil {
			return fmt.Errorf("program %d: %w", programID, err)
		}
		if !exists {
			return ErrProgramNotFound
		}
	}
	return ErrNoAccess
}

// Input is a listener as asked for: Events nil means DefaultEvents;
// IncludeTest nil means true (a developer's handler sees test sales).
type Input struct {
	Events      []string
	IncludeTest *bool
}

// Started is a new listener, its secret (answered this once) and the
// program's position: polls from After get only what is written next.
type Started struct {
	Listener
	Secret string
	After  int64
}

// Start checks access and the input, then writes the listener with a
// fresh sealed secret.
func (s *Service) Start(ctx context.Context, c Caller, programID int64, in Input) (Started, error) {
	if err := s.Check(ctx, c, programID); err != nil {
		return Started{}, err
	}
	types := DefaultEvents()
	if in.Events != nil {
		var err error
		if types, err = checkEvents(in.Events); err != nil {
			return Started{}, err
		}
	}
	includeTest := true
	if in.IncludeTest != nil {
		includeTest = *in.IncludeTest
	}
	if s.cfg.Box == nil {
		return Started{}, ErrNoSecretKey
	}
	sec, err := secret.New()
	if err != nil {
		return Started{}, err
	}
	now := s.cfg.Now().UTC()
	box := s.cfg.Box
	l, after, err := s.cfg.Store.Create(ctx, Listener{ProgramID: programID, Events: types, IncludeTest: includeTest,
		CreatedAt: now, ExpiresAt: now.Add(TTL)}, func(id int64) ([]byte, error) { return box.SealListener(sec, id) }, MaxListeners)
	if err != nil {
		return Started{}, err
	}
	return Started{Listener: l, Secret: sec, After: after}, nil
}

func checkEvents(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, ErrEventsEmpty
	}
	out := make([]string, 0, len(in))
	for _, v := range in {
		if !slices.Contains(events.Types(), v) {
			return nil, errUnknownEvent(v)
		}
		if slices.Contains(out, v) {
			return nil, &Error{Kind: errkind.Invalid, Field: "events", Message: "events lists " + v + " twice"}
		}
		out = append(out, v)
	}
	return out, nil
}

// Page is a poll's answer: the events taken from the listener's queue, and
// the highest seq the client has seen (the last event's, or the one it
// gave; informational: the queue, not this position, decides what comes
// next, so an event committed late is never skipped).
type Page struct {
	Events    []Event
	After     int64
	ExpiresAt time.Time
}

// Poll checks access, keeps the listener alive for TTL more, and takes the
// events queued for the listener, waiting up to wait (real time) for the
// first of them.
func (s *Service) Poll(ctx context.Context, c Caller, programID, id, after int64, wait time.Duration) (Page, error) {
	if err := s.Check(ctx, c, programID); err != nil {
		return Page{}, err
	}
	if id <= 0 {
		return Page{}, ErrBadListenerID
	}
	if after < 0 {
		return Page{}, ErrBadAfter
	}
	if wait < 0 || wait > MaxWait*time.Second {
		return Page{}, ErrBadWait
	}
	now := s.cfg.Now().UTC()
	l, ok, err := s.cfg.Store.Touch(ctx, programID, id, now, now.Add(TTL))
	if err != nil {
		return Page{}, err
	}
	if !ok {
		return Page{}, ErrNotFound
	}
	start := time.Now() // the wait is the client's real seconds
	for {
		evs, err := s.cfg.Store.Take(ctx, l.ID, MaxEvents)
		if err != nil {
			return Page{}, err
		}
		if len(evs) > 0 {
			return Page{Events: evs, After: max(after, evs[len(evs)-1].Seq), ExpiresAt: l.ExpiresAt}, nil
		}
		left := wait - time.Since(start)
		if left <= 0 {
			return Page{Events: []Event{}, After: after, ExpiresAt: l.ExpiresAt}, nil
		}
		if err := s.cfg.Wait(ctx, min(left, s.cfg.PollInterval)); err != nil {
			return Page{}, err
		}
	}
}

// Stop checks access and deletes the listener.
func (s *Service) Stop(ctx context.Context, c Caller, programID, id int64) error {
	if err := s.Check(ctx, c, programID); err != nil {
		return err
	}
	if id <= 0 {
		return ErrBadListenerID
	}
	ok, err := s.cfg.Store.Delete(ctx, programID, id)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotFound
	}
	return nil
}
