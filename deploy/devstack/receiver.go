package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/svc-dev/svc/deploy/devstack/seed"
)

// receiver is the tiny local webhook receiver of `make run` (and of
// `devstack receive`): it prints every webhook it gets and whether its
// signature verifies with the endpoint's secret, using the Standard
// Webhooks library exactly as a brand's handler would.
type receiver struct {
	out io.Writer
	mu  sync.Mutex
	wh  *standardwebhooks.Webhook
}

// setSecret makes the receiver verify with secret (whsec_…).
func (r *receiver) setSecret(secret string) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("webhook secret: %w", err)
	}
	r.mu.Lock()
	r.wh = wh
	r.mu.Unlock()
	return nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	wh := r.wh
	r.mu.Unlock()
	verdict := "signature not checked (no secret given)"
	status := http.StatusOK
	if wh != nil {
		if err := wh.Verify(body, req.Header); err != nil {
			verdict, status = "signature BAD: "+err.Error(), http.StatusUnauthorized
		} else {
			verdict = "signature ok"
		}
	}
	typ := "?"
	if i := strings.Index(string(body), `"type":"`); i >= 0 {
		rest := string(body)[i+len(`"type":"`):]
		if j := strings.IndexByte(rest, '"'); j >= 0 {
			typ = rest[:j]
		}
	}
	fmt.Fprintf(r.out, "webhook   %s %s (%s)\n          %s\n", typ, req.Header.Get("webhook-id"), verdict, body)
	w.WriteHeader(status)
}

// listenReceiver starts r on addr and returns its URL and a stop function.
func listenReceiver(addr string, r *receiver) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("webhook receiver: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: r}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/", func() { _ = srv.Close() }, nil
}

// webhookEvents are the demo endpoint's events: every v1 type but the
// high-volume click.recorded.
var webhookEvents = []string{"lead.created", "sale.created", "sale.refunded", "commission.created", "commission.approved",
	"commission.reversed", "commission.paid", "partner.enrolled", "payout.paid"}

// demoWebhook starts the local receiver and points a webhook endpoint of
// the demo program at it, through the public route as the demo owner (an
// admin-issued session): created on the first run, its secret rotated on
// later ones so the receiver knows the secret that signs. It works in the
// background, waiting for the webhooks replica to know the owner; a
// failure is printed, never fatal (the stack works without it). The
// returned function stops the receiver.
func demoWebhook(ctx context.Context, out io.Writer, baseURL string, res seed.Result) func() {
	addr := envOr("DEVSTACK_WEBHOOK_ADDR", "127.0.0.1:8099")
	r := &receiver{out: out}
	url, stop, err := listenReceiver(addr, r)
	if err != nil {
		fmt.Fprintf(out, "webhooks  no local receiver: %v (set DEVSTACK_WEBHOOK_ADDR to another address)\n", err)
		return func() {}
	}
	go func() {
		id, err := pointDemoEndpoint(ctx, baseURL, res, url, r)
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(out, "webhooks  the demo endpoint was not set up: %v\n", err)
			}
			return
		}
		fmt.Fprintf(out, "webhooks  endpoint %d of the demo program posts its events to the local receiver %s;\n", id, url)
		fmt.Fprintf(out, "          each one is printed here with its Standard Webhooks signature check (try the sale above)\n")
	}()
	return stop
}

func pointDemoEndpoint(ctx context.Context, baseURL string, res seed.Result, url string, r *receiver) (int64, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	admin := &seed.Client{BaseURL: baseURL, AdminToken: adminToken(), HTTP: hc}
	var sess struct {
		Token string `json:"token"`
	}
	if err := admin.Call(ctx, http.MethodPost, "/admin/v1/sessions", map[string]any{"user_id": res.UserID}, &sess); err != nil {
		return 0, err
	}
	owner := &seed.Client{BaseURL: baseURL, AdminToken: sess.Token, HTTP: hc}
	path := fmt.Sprintf("/api/v1/programs/%d/webhooks", res.ProgramID)
	var list []struct {
		ID  int64  `json:"id"`
		URL string `json:"url"`
	}
	// The webhooks replica learns the owner's membership from the catalog
	// topic: on a first run it may not have it yet.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := owner.Call(ctx, http.MethodGet, path, nil, &list)
		if err == nil {
			break
		}
		var se *seed.Error
		if !errors.As(err, &se) || (se.Status != http.StatusForbidden && se.Status != http.StatusNotFound) || time.Now().After(deadline) {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	var out struct {
		ID     int64  `json:"id"`
		Secret string `json:"secret"`
	}
	for _, e := range list {
		if e.URL == url {
			if err := owner.Call(ctx, http.MethodPost, fmt.Sprintf("%s/%d/secret", path, e.ID), nil, &out); err != nil {
				return 0, err
			}
			out.ID = e.ID
			return out.ID, r.setSecret(out.Secret)
		}
	}
	if err := owner.Call(ctx, http.MethodPost, path, map[string]any{"url": url, "events": webhookEvents,
		"description": "make run's local receiver", "include_test": true}, &out); err != nil {
		return 0, err
	}
	return out.ID, r.setSecret(out.Secret)
}
