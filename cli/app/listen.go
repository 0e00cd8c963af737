package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/svc-dev/svc/cli/internal/api"
)

// svc listen's timings.
const (
	// listenMaxWait is the longest poll the server allows (seconds); the
	// poll is shortened to stay inside SVC_HTTP_TIMEOUT.
	listenMaxWait = 25
	// forwardTimeout bounds one post to the local server, as the
	// dispatcher bounds a delivery.
	forwardTimeout = 10 * time.Second
	// listenMaxBackoff caps the wait between attempts to reach svc again.
	listenMaxBackoff = 30 * time.Second
)

// listener is the start route's answer.
type listener struct {
	ID        int64     `json:"id"`
	Secret    string    `json:"secret"`
	After     int64     `json:"after"`
	Events    []string  `json:"events"`
	ExpiresAt time.Time `json:"expires_at"`
}

// polledEvent is one event of a poll; Body keeps the exact bytes the
// server sent, which are the bytes signed and forwarded.
type polledEvent struct {
	Seq  int64           `json:"seq"`
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
}

func (a *app) listenCmd() *cobra.Command {
	var forwardTo, program string
	var types []string
	cmd := &cobra.Command{
		Use:   "listen --forward-to URL",
		Short: "Forward the program's events, signed, to a server on your machine",
		Long: `svc listen streams the program's webhook events (sale.created, commission.created, …) to a
local server while you develop its handler, signed with the Standard Webhooks headers
(webhook-id, webhook-timestamp, webhook-signature) exactly as svc signs deliveries to
registered endpoints. The signing secret printed at the start is this session's only.

Credential: the login token of "svc login" (with --program, or the account's only
program); else the program API key (SVC_API_KEY, else "svc config set api-key"), whose
program is the one listened to (also when a key is set and --program is not given).
Ctrl-C stops listening (exit 0).`,
		Example: `  svc listen --forward-to http://localhost:3000/hooks
  svc listen --forward-to http://localhost:3000/hooks --events sale.created,commission.created`,
		Args: noArgs,
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			u, err := url.Parse(forwardTo)
			if forwardTo == "" {
				return &usageError{msg: "svc listen needs --forward-to URL, e.g. http://localhost:3000/hooks", cmd: cmd.CommandPath()}
			}
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return &usageError{msg: fmt.Sprintf("--forward-to must be an http:// or https:// URL, e.g. http://localhost:3000/hooks (got %q)", forwardTo), cmd: cmd.CommandPath()}
			}
			var programID int64
			if program != "" {
				if programID, err = strconv.ParseInt(program, 10, 64); err != nil || programID <= 0 {
					return &usageError{msg: fmt.Sprintf("--program must be a program id, a whole number (got %q)", program), cmd: cmd.CommandPath()}
				}
			}
			return a.listen(cmd.Context(), forwardTo, types, programID)
		}),
	}
	cmd.Flags().StringVar(&forwardTo, "forward-to", "", "URL of your local server that receives the events")
	cmd.Flags().StringSliceVar(&types, "events", nil, "event types to receive, comma separated (default: all but click.recorded)")
	cmd.Flags().StringVar(&program, "program", "", "program id (needed with a login token; a key has its own program)")
	return cmd
}

// listenCredential prefers the login token of "svc login" to this server
// (as the other login-token commands), with --program or the account's
// only program; the program key when not logged in, or when a key is set
// and no --program is given (the key names its program, a login may have
// several).
func (a *app) listenCredential(ctx context.Context, c *api.Client, r resolved, programID int64) (token, hint string, _ int64, _ error) {
	cred, loginErr := a.loginToken(r)
	if loginErr == nil && (programID > 0 || r.apiKey == "") {
		return a.listenLogin(ctx, c, cred.Token, programID)
	}
	if r.apiKey != "" {
		if programID > 0 {
			return r.apiKey, hintProgramKey, programID, nil
		}
		resp, err := a.call(ctx, c, api.Request{Method: http.MethodGet, Path: "/api/v1/cli/status", Token: r.apiKey}, hintProgramKey)
		if err != nil {
			return "", "", 0, err
		}
		var s struct {
			ProgramID json.RawMessage `json:"programId"`
		}
		if err := json.Unmarshal(resp.Data, &s); err != nil {
			return "", "", 0, fmt.Errorf("status: unexpected answer: %w", err)
		}
		id, err := strconv.ParseInt(strings.Trim(string(s.ProgramID), `"`), 10, 64)
		if err != nil {
			return "", "", 0, fmt.Errorf("status: unexpected program id %s", s.ProgramID)
		}
		return r.apiKey, hintProgramKey, id, nil
	}
	var ae *authError
	if errors.As(loginErr, &ae) {
		ae.hint = `set the program's key with "svc config set api-key" or ` + EnvAPIKey + `, or run "svc login"`
	}
	return "", "", 0, loginErr
}

// listenLogin uses the login token with --program, else the account's only
// program.
func (a *app) listenLogin(ctx context.Context, c *api.Client, token string, programID int64) (string, string, int64, error) {
	if programID > 0 {
		return token, hintLogin, programID, nil
	}
	resp, err := a.call(ctx, c, api.Request{Method: http.MethodGet, Path: "/api/v1/cli/programs", Token: token}, hintLogin)
	if err != nil {
		return "", "", 0, err
	}
	var progs []struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(resp.Data, &progs); err != nil {
		return "", "", 0, fmt.Errorf("programs: unexpected answer: %w", err)
	}
	if len(progs) != 1 {
		return "", "", 0, &usageError{msg: fmt.Sprintf("your account has %d programs: choose one with --program (see \"svc programs\")", len(progs)), cmd: "svc listen"}
	}
	id, err := strconv.ParseInt(strings.Trim(string(progs[0].ID), `"`), 10, 64)
	if err != nil {
		return "", "", 0, fmt.Errorf("programs: unexpected program id %s", progs[0].ID)
	}
	return token, hintLogin, id, nil
}

func (a *app) listen(ctx context.Context, forwardTo string, types []string, programID int64) error {
	r, err := a.settings()
	if err != nil {
		return err
	}
	c := a.client(r.baseURL)
	token, hint, programID, err := a.listenCredential(ctx, c, r, programID)
	if err != nil {
		return err
	}
	timeout, err := a.httpTimeout()
	if err != nil {
		return err
	}
	// The poll's wait stays 10 s inside the per-call timeout.
	wait := min(listenMaxWait, int((timeout-10*time.Second)/time.Second))
	wait = max(wait, 0)
	base := fmt.Sprintf("/api/v1/programs/%d/webhooks/listen", programID)
	var body any
	if len(types) > 0 {
		body = map[string]any{"events": types}
	}
	start := func() (listener, error) {
		resp, err := a.call(ctx, c, api.Request{Method: http.MethodPost, Path: base, Token: token, Body: body}, hint)
		if err != nil {
			return listener{}, err
		}
		var l listener
		if err := json.Unmarshal(resp.Data, &l); err != nil || l.ID <= 0 || l.Secret == "" {
			return listener{}, fmt.Errorf("listen: unexpected answer: %s", resp.Data)
		}
		a.printReady(programID, forwardTo, l)
		return l, nil
	}
	l, err := start()
	if err != nil {
		return err
	}
	fwd := newForwarder(l.Secret)
	defer func() {
		// Ctrl-C: the listener goes now rather than in 2 minutes (a
		// failure here costs only that).
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := c.Do(stop, api.Request{Method: http.MethodDelete, Path: fmt.Sprintf("%s/%d", base, l.ID), Token: token}); err != nil {
			fmt.Fprintf(a.o.Stderr, "could not stop the listener (it expires in 2 minutes): %v\n", err)
		}
	}()
	after := l.After
	backoff := time.Second
	for ctx.Err() == nil {
		q := url.Values{"after": {strconv.FormatInt(after, 10)}, "wait": {strconv.Itoa(wait)}}
		resp, err := c.Do(ctx, api.Request{Method: http.MethodGet, Path: fmt.Sprintf("%s/%d/events", base, l.ID), Query: q, Token: token})
		if ctx.Err() != nil {
			break
		}
		var apiErr *api.Error
		var te *api.TransportError
		switch {
		case err == nil:
			backoff = time.Second
		case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
			// Expired (the machine slept past 2 minutes): start again,
			// with a new secret, from now.
			fmt.Fprintln(a.o.Stderr, "the listener expired; starting a new one (events in between are not forwarded)")
			if l, err = start(); err != nil {
				return err
			}
			fwd = newForwarder(l.Secret)
			after = l.After
			continue
		case errors.As(err, &te), errors.As(err, &apiErr) && (apiErr.Status >= 500 || apiErr.Status == http.StatusTooManyRequests):
			fmt.Fprintf(a.o.Stderr, "svc unreachable (%v); retrying in %s\n", err, backoff)
			if a.wait(ctx, backoff) != nil {
				return nil // Ctrl-C while waiting
			}
			backoff = min(2*backoff, listenMaxBackoff)
			continue
		default:
			return err
		}
		var page struct {
			Data  []polledEvent `json:"data"`
			After int64         `json:"after"`
		}
		if err := json.Unmarshal(resp.Raw, &page); err != nil {
			return fmt.Errorf("listen: unexpected answer: %w", err)
		}
		for _, ev := range page.Data {
			a.printForward(ev, fwd.forward(ctx, forwardTo, ev))
		}
		after = page.After
	}
	return nil
}

// wait sleeps d (Options.Sleep in tests) or until ctx ends.
func (a *app) wait(ctx context.Context, d time.Duration) error {
	if a.o.Sleep != nil {
		return a.o.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (a *app) printReady(programID int64, forwardTo string, l listener) {
	if a.jsonOut {
		_ = json.NewEncoder(a.o.Stdout).Encode(map[string]any{"ready": true, "program_id": programID, "forward_to": forwardTo,
			"listener_id": l.ID, "secret": l.Secret, "events": l.Events})
		return
	}
	fmt.Fprintf(a.o.Stdout, "Ready: forwarding program %d events to %s. Signing secret: %s (this session only)\n", programID, forwardTo, l.Secret)
	fmt.Fprintln(a.o.Stderr, "Press Ctrl-C to stop.")
}

// forwarded is the outcome of one post to the local server.
type forwarded struct {
	at       time.Time
	status   int
	duration time.Duration
	err      error
}

func (a *app) printForward(ev polledEvent, f forwarded) {
	if a.jsonOut {
		line := map[string]any{"time": f.at.UTC().Format(time.RFC3339Nano), "type": ev.Type, "id": ev.ID, "duration_ms": f.duration.Milliseconds()}
		if f.err != nil {
			line["error"] = f.err.Error()
		} else {
			line["status"] = f.status
		}
		_ = json.NewEncoder(a.o.Stdout).Encode(line)
		return
	}
	outcome := fmt.Sprintf("%d %s (%s)", f.status, http.StatusText(f.status), f.duration.Round(time.Millisecond))
	if f.err != nil {
		outcome = "error: " + f.err.Error()
	}
	fmt.Fprintf(a.o.Stdout, "%s  %-20s %s → %s\n", f.at.Local().Format("2006-01-02 15:04:05"), ev.Type, ev.ID, outcome)
}

// forwarder signs and posts events to the local server.
type forwarder struct {
	secret string
	hc     *http.Client
}

func newForwarder(secret string) *forwarder {
	return &forwarder{secret: secret, hc: &http.Client{
		Timeout: forwardTimeout,
		// As the dispatcher: a redirect is the answer, not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// forward posts the exact body with the Standard Webhooks headers, signed
// now with the listener's secret.
func (f *forwarder) forward(ctx context.Context, to string, ev polledEvent) forwarded {
	at := time.Now()
	out := forwarded{at: at}
	wh, err := standardwebhooks.NewWebhook(f.secret)
	if err != nil {
		out.err = fmt.Errorf("signing secret: %w", err)
		return out
	}
	sig, err := wh.Sign(ev.ID, at, ev.Body)
	if err != nil {
		out.err = fmt.Errorf("sign: %w", err)
		return out
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(ev.Body))
	if err != nil {
		out.err = err
		return out
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "svc-cli-listen")
	req.Header.Set("webhook-id", ev.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := f.hc.Do(req)
	out.duration = time.Since(at)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		out.err = err
		return out
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	out.status = resp.StatusCode
	return out
}
