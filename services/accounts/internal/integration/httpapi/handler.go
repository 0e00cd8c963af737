// Package httpapi is the HTTP transport of the command-line integration
// routes, GET /api/v1/cli/status and POST /api/v1/cli/test-event: program
// API key authentication, the shared CLI rate limit, decoding, the answers
// and the one error encoder of the group.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/httperr"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
	"github.com/svc-dev/svc/services/accounts/internal/integration/endpoints"
)

// Messages of the 500s (the request id is appended).
const (
	MsgStatusFailed    = "Failed to get status"
	MsgTestEventFailed = "Failed to process test event"
	MsgChainFailed     = "Failed to run synthetic chain"
)

// Route is one route, named for metrics.
type Route struct {
	Pattern string
	Name    string
	Handler http.Handler
}

// Config carries what the transport needs besides the endpoints.
type Config struct {
	// Keys authenticates program API keys (CLI messages).
	Keys *apikey.Authenticator
	// Limit is the limiter shared by every /api/v1/cli/* route, per API
	// key; it runs once the key has authenticated (so an invalid key gets
	// no bucket) and before the endpoint, as the contract says.
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the key check: a client IP whose 401s used up its
	// allowance is refused 429 before the key is looked up.
	FailedAuth func(http.Handler) http.Handler
	Logger     *slog.Logger
}

// Routes lists the two routes.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	if cfg.Limit == nil {
		cfg.Limit = func(h http.Handler) http.Handler { return h }
	}
	if cfg.FailedAuth == nil {
		cfg.FailedAuth = func(h http.Handler) http.Handler { return h }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	opts := httpkit.ServerOptions(errs.Failure, cfg.Logger)
	status := kithttp.NewServer(set.Status, decodeStatus, encodeStatus, opts...)
	testEvent := kithttp.NewServer(set.TestEvent, decodeTestEvent, encodeTestEvent, opts...)

	auth := func(msg string) func(http.Handler) http.Handler {
		return cfg.Keys.Middleware(apikey.CLIMessages(), func(w http.ResponseWriter, r *http.Request, err error) {
			cfg.Logger.ErrorContext(r.Context(), "cli key lookup failed", "err", err)
			_ = httpkit.WriteServerErrorWithRequestID(r.Context(), w, msg)
		})
	}
	// GET status answers 200, 401 and 429 without X-Request-ID; only its
	// 500 carries one. The rule wraps the limiters and the key check so
	// their answers follow it too.
	noRequestID := httpkit.OmitRequestIDWhen(func(s int) bool { return s != http.StatusInternalServerError })
	return []httpkit.Route{
		{Pattern: "GET /api/v1/cli/status", Name: "cli_status", Handler: noRequestID(cfg.FailedAuth(auth(MsgStatusFailed)(cfg.Limit(status)))), LimitChecksURL: true},
		{Pattern: "POST /api/v1/cli/test-event", Name: "cli_test_event", Handler: cfg.FailedAuth(auth(MsgTestEventFailed)(cfg.Limit(testEvent))), LimitChecksURL: true},
	}
}

type statusBody struct {
	Data statusData `json:"data"`
}

type statusData struct {
	ProgramID    string       `json:"programId"`
	StepStatuses stepStatuses `json:"stepStatuses"`
	Statistics   statistics   `json:"statistics"`
	HasPartners  bool         `json:"hasPartners"`
	LastUpdated  string       `json:"lastUpdated"`
}

type stepStatuses struct {
	Pageview  string `json:"pageview"`
	Referrals string `json:"referrals"`
	Payments  string `json:"payments"`
}

type statistics struct {
	Pageview  eventStats `json:"pageview"`
	Referrals eventStats `json:"referrals"`
	Payments  payments   `json:"payments"`
}

type eventStats struct {
	TestEventCount  int          `json:"testEventCount"`
	HasTestEvents   bool         `json:"hasTestEvents"`
	LatestTestEvent *latestEvent `json:"latestTestEvent"`
}

type latestEvent struct {
	ID        int64  `json:"id"`
	Timestamp string `json:"timestamp"`
	CreatedAt string `json:"createdAt"`
}

type payments struct {
	PaymentTrackingMode       string  `json:"paymentTrackingMode"`
	MethodReady               bool    `json:"methodReady"`
	ProcessorConnectionStatus string  `json:"processorConnectionStatus"`
	IsProcessorConnected      bool    `json:"isProcessorConnected"`
	ProcessorAccountID        *string `json:"processorAccountId"`
	ChargesEnabled            bool    `json:"chargesEnabled"`
	PayoutsEnabled            bool    `json:"payoutsEnabled"`
	DetailsSubmitted          bool    `json:"detailsSubmitted"`
	ConnectionDate            *string `json:"connectionDate"`
}

// isoTime is JavaScript's toISOString: UTC, milliseconds, Z.
func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func stats(s integration.EventStats) eventStats {
	out := eventStats{TestEventCount: s.Count, HasTestEvents: s.Has()}
	if s.Latest != nil {
		out.LatestTestEvent = &latestEvent{ID: s.Latest.ID, Timestamp: isoTime(s.Latest.Timestamp), CreatedAt: isoTime(s.Latest.CreatedAt)}
	}
	return out
}

func statusAnswer(st integration.Status) statusBody {
	p := st.Payments
	pay := payments{
		PaymentTrackingMode:       p.Mode,
		MethodReady:               p.Ready(),
		ProcessorConnectionStatus: p.ConnectionStatus,
		IsProcessorConnected:      p.Connected(),
		ChargesEnabled:            p.ChargesEnabled,
		PayoutsEnabled:            p.PayoutsEnabled,
		DetailsSubmitted:          p.DetailsSubmitted,
	}
	if p.Connected() && p.AccountID != "" {
		id := p.AccountID
		pay.ProcessorAccountID = &id
	}
	if p.ConnectedAt != nil {
		d := isoTime(*p.ConnectedAt)
		pay.ConnectionDate = &d
	}
	return statusBody{Data: statusData{
		ProgramID: strconv.FormatInt(st.ProgramID, 10),
		StepStatuses: stepStatuses{
			Pageview:  st.Pageview.Step(),
			Referrals: st.Referrals.Step(),
			Payments:  p.Step(),
		},
		Statistics:  statistics{Pageview: stats(st.Pageview), Referrals: stats(st.Referrals), Payments: pay},
		HasPartners: st.HasPartners,
		LastUpdated: isoTime(st.GeneratedAt),
	}}
}

func encodeStatus(ctx context.Context, w http.ResponseWriter, response any) error {
	r := response.(endpoints.StatusResponse)
	if r.Err != nil {
		errs.Refusal(ctx, r.Err, w)
		return nil
	}
	return httpkit.WriteJSON(w, http.StatusOK, statusAnswer(r.Status))
}

type eventData struct {
	EventType string `json:"event_type"`
	EventID   int64  `json:"eventId"`
	ProgramID int64  `json:"programId"`
	TestMode  bool   `json:"test_mode"`
	Message   string `json:"message"`
}

type chainStep struct {
	Step    string `json:"step"`
	Status  string `json:"status"`
	EventID *int64 `json:"eventId"`
}

type chainData struct {
	Type      string      `json:"type"`
	ProgramID int64       `json:"programId"`
	TestMode  bool        `json:"test_mode"`
	Chain     []chainStep `json:"chain"`
}

func chainSteps(steps []integration.ChainStep) []chainStep {
	out := make([]chainStep, 0, len(steps))
	for _, s := range steps {
		c := chainStep{Step: string(s.Step), Status: s.Status}
		if s.EventID != 0 {
			id := s.EventID
			c.EventID = &id
		}
		out = append(out, c)
	}
	return out
}

func encodeTestEvent(ctx context.Context, w http.ResponseWriter, response any) error {
	r := response.(endpoints.TestEventResponse)
	if r.Err != nil {
		errs.Refusal(ctx, r.Err, w)
		return nil
	}
	if r.Chain != nil {
		return httpkit.WriteJSON(w, http.StatusOK, dataBody[chainData]{Data: chainData{
			Type: "chain", ProgramID: r.ProgramID, TestMode: true, Chain: chainSteps(r.Chain),
		}})
	}
	return httpkit.WriteJSON(w, http.StatusOK, dataBody[eventData]{Data: eventData{
		EventType: string(r.EventType), EventID: r.Event.EventID, ProgramID: r.ProgramID, TestMode: true, Message: r.Event.Message,
	}})
}

// dataBody is an answer's envelope: {"data": ...}.
type dataBody[T any] struct {
	Data T `json:"data"`
}

// failedMessage names the operation of a 500.
func failedMessage(err error) string {
	var op *endpoints.OpError
	if errors.As(err, &op) {
		switch op.Op {
		case endpoints.OpStatus:
			return MsgStatusFailed
		case endpoints.OpChain:
			return MsgChainFailed
		}
	}
	return MsgTestEventFailed
}

// errs is the group's data for the service's one error encoder: the 500
// names the operation and quotes the request id; 5xx bodies never carry the
// cause (the go-kit error handler logs it with the request id).
var errs = httperr.Route{FailFor: failedMessage, RequestID: true}
