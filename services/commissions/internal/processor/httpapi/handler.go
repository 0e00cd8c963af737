// Package httpapi is the HTTP transport of the payment processor's webhook,
// POST /api/v1/webhooks/processor: the signature check (the processor's
// scheme, the current and the previous secret), the checks that keep an
// unstorable body out of jsonb, the envelope decoder and the one error
// encoder.
package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/commissions/internal/processor"
	"github.com/svc-dev/svc/services/commissions/internal/processor/endpoints"
)

// WebhookPath receives the connected payment processor's events (the
// platform's own endpoint: brands add no webhook).
const WebhookPath = "/api/v1/webhooks/processor"

// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">[,v1=…]" under the webhook secret, the processor's scheme.
const SignatureHeader = "Processor-Signature"

// SignatureTolerance is how far a signature's timestamp may be from now.
const SignatureTolerance = 5 * time.Minute

// MsgFailed is the 500 of a delivery that could not be handled (the
// processor retries it).
const MsgFailed = "Processor event handling failed"

// Config carries what the transport needs besides the endpoint.
type Config struct {
	Logger *slog.Logger
	Now    func() time.Time
	// Secrets verify signatures: PROCESSOR_WEBHOOK_SECRET and, while it is
	// rotated, PROCESSOR_WEBHOOK_SECRET_PREVIOUS. A signature under any of
	// them is accepted. Empty: the route is not served.
	Secrets []string
}

// Routes lists the webhook route (none without a secret).
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	var secrets []string
	for _, s := range cfg.Secrets {
		if s != "" {
			secrets = append(secrets, s)
		}
	}
	if len(secrets) == 0 {
		return nil
	}
	enc := errorEncoder{logger: cfg.Logger}.encode
	h := kithttp.NewServer(set.Event, decodeEvent(secrets, cfg.Now), encodeResponse(enc), httpkit.ServerOptions(enc, cfg.Logger)...)
	return []httpkit.Route{{Pattern: "POST " + WebhookPath, Name: "processor_webhook", Handler: h}}
}

// Sign returns the signature header value for body at t under secret: what
// the processor sends, and what tests and the local stack use to play it.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// verifySignature accepts the header when its timestamp is within the
// tolerance and any of its v1 entries matches the body under any of the
// secrets (the processor sends several while its secret is being rolled;
// we keep the previous one while ours is). Every comparison is constant
// time.
func verifySignature(secrets []string, header string, body []byte, now time.Time) bool {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > SignatureTolerance || d < -SignatureTolerance {
		return false
	}
	ok := false
	for _, secret := range secrets {
		want := mac(secret, ts, body)
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				ok = true
			}
		}
	}
	return ok
}

// encodeResponse writes the answer as the 200 body, or its refusal.
func encodeResponse(enc kithttp.ErrorEncoder) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		if f, ok := resp.(endpoint.Failer); ok && f.Failed() != nil {
			enc(ctx, f.Failed(), w)
			return nil
		}
		return httpkit.WriteJSON(w, http.StatusOK, resp)
	}
}

// errorEncoder is the route's one error encoder: a decoding failure's own
// status and message, a refused event's 400 with its message, anything
// else 500 MsgFailed (internals only in the log).
type errorEncoder struct {
	logger *slog.Logger
}

func (e errorEncoder) encode(ctx context.Context, err error, w http.ResponseWriter) {
	var de *httpkit.DecodeError
	var pe *processor.Error
	status := errkind.Status(err)
	switch {
	case errors.As(err, &de):
		_ = httpkit.WritePlatformError(w, de.Status, de.Message)
	case errors.As(err, &pe) && status < 500:
		_ = httpkit.WritePlatformError(w, status, pe.Message)
	default:
		e.logger.ErrorContext(ctx, "processor event failed; the processor retries it", "err", err)
		_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, MsgFailed)
	}
}
