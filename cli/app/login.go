package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/cli/internal/api"
	"github.com/svc-dev/svc/cli/internal/config"
)

const (
	// loginLinkLifetime is the contract's sign-in link lifetime, used when
	// auth/start does not say when its link expires.
	loginLinkLifetime = 5 * time.Minute
	// expiryGrace keeps polling a little past expires_at so the server's own
	// "expired" answer (its clock) decides, not ours.
	expiryGrace = 15 * time.Second
	// maxPollFailures is how many transient poll failures in a row (5xx,
	// network) are tolerated before giving up.
	maxPollFailures = 3
	spinnerFrame    = 120 * time.Millisecond
)

type startData struct {
	State     string `json:"state"`
	URL       string `json:"url"`
	ExpiresAt string `json:"expires_at"`
	// UserCode is shown here and on the page the sign-in lands on; the
	// person confirms there that they match, and only then does the poll
	// get the token (someone who sent you a link of theirs cannot match
	// the code your terminal shows).
	UserCode string `json:"user_code"`
}

type pollData struct {
	Status    string          `json:"status"`
	Token     string          `json:"token"`
	ExpiresAt string          `json:"expires_at"`
	User      json.RawMessage `json:"user"`
}

func (a *app) loginCmd() *cobra.Command {
	var interval, timeout time.Duration
	var noBrowser bool
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign in through the browser and store the login token",
		Long: `Starts a sign-in session, prints the sign-in link and a short code and opens the link in a browser ($BROWSER,
else the system opener), then waits until you have signed in and confirmed on the page that it shows the same code.
The login token is stored in <user config dir>/svc/credentials.json (mode 0600).`,
		Args: noArgs,
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("poll-interval") {
				d, err := a.envPollInterval()
				if err != nil {
					return err
				}
				interval = d
			}
			if interval <= 0 {
				return &usageError{msg: "--poll-interval must be positive"}
			}
			if timeout < 0 {
				return &usageError{msg: "--timeout must not be negative"}
			}
			return a.login(cmd.Context(), interval, timeout, noBrowser)
		}),
	}
	cmd.Flags().DurationVar(&interval, "poll-interval", DefaultPollInterval, "time between checks for a completed sign-in (env "+EnvPollInterval+")")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: when the sign-in link expires)")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "only print the sign-in link, do not open a browser")
	return cmd
}

// envPollInterval reads SVC_POLL_INTERVAL as a Go duration or whole seconds.
func (a *app) envPollInterval() (time.Duration, error) {
	return envDuration(a.o.Getenv, EnvPollInterval, DefaultPollInterval)
}

func (a *app) login(ctx context.Context, interval, timeout time.Duration, noBrowser bool) error {
	r, err := a.settings()
	if err != nil {
		return err
	}
	c := a.client(r.baseURL)
	resp, err := a.call(ctx, c, api.Request{Method: http.MethodPost, Path: "/api/v1/cli/auth/start", Body: struct{}{}}, "")
	if err != nil {
		return fmt.Errorf("start sign-in: %w", err)
	}
	var start startData
	if err := json.Unmarshal(resp.Data, &start); err != nil || start.State == "" || start.URL == "" {
		return fmt.Errorf("start sign-in: unexpected answer from %s", r.baseURL)
	}
	wait := loginLinkLifetime + expiryGrace
	if t, err := time.Parse(time.RFC3339, start.ExpiresAt); err == nil {
		if d := t.Sub(a.o.Now()); d > 0 && d < 24*time.Hour {
			wait = d + expiryGrace
		}
	}
	if timeout > 0 && timeout < wait {
		wait = timeout
	}

	stderr := a.o.Stderr
	fmt.Fprintf(stderr, "Open this link to sign in:\n\n  %s\n\n", start.URL)
	if start.UserCode != "" {
		fmt.Fprintf(stderr, "Your code: %s\nAfter signing in, confirm on the page only if it shows this same code.\n\n", start.UserCode)
	}
	if !noBrowser {
		if err := a.o.OpenURL(ctx, start.URL); err != nil {
			fmt.Fprintf(stderr, "Could not open a browser (%v); open the link yourself.\n", err)
		}
	}

	data, err := a.pollLogin(ctx, c, start.State, interval, wait)
	if err != nil {
		return err
	}
	cred := config.Credentials{BaseURL: r.baseURL, Token: data.Token, User: data.User}
	if t, err := time.Parse(time.RFC3339, data.ExpiresAt); err == nil {
		cred.ExpiresAt = t
	}
	if err := r.store.SaveCredentials(cred); err != nil {
		return err
	}
	if a.jsonOut {
		// The token itself is never printed.
		out := map[string]any{"status": "complete", "base_url": r.baseURL}
		if data.ExpiresAt != "" {
			out["expires_at"] = data.ExpiresAt
		}
		if len(data.User) > 0 {
			out["user"] = data.User
		}
		return a.printJSON(out)
	}
	who := userLabel(data.User)
	if who != "" {
		fmt.Fprintf(a.o.Stdout, "Signed in to %s as %s.\n", r.baseURL, who)
	} else {
		fmt.Fprintf(a.o.Stdout, "Signed in to %s.\n", r.baseURL)
	}
	fmt.Fprintf(a.o.Stdout, "Login token saved to %s", r.store.Path(config.CredentialsFile))
	if !cred.ExpiresAt.IsZero() {
		fmt.Fprintf(a.o.Stdout, " (valid until %s)", cred.ExpiresAt.Local().Format(time.RFC1123))
	}
	fmt.Fprintln(a.o.Stdout, ".")
	return nil
}

// pollLogin polls auth/poll every interval until the session completes,
// expires or wait has passed, with a spinner on a terminal. Waiting is
// measured on the monotonic clock: it is elapsed time, not a time of day.
func (a *app) pollLogin(parent context.Context, c *api.Client, state string, interval, wait time.Duration) (pollData, error) {
	ctx, cancel := context.WithTimeout(parent, wait)
	deadline, _ := ctx.Deadline()
	defer cancel()
	sp := newSpinner(a.o.Stderr, a.stderrTTY())
	if !sp.tty {
		fmt.Fprintln(a.o.Stderr, "Waiting for sign-in to complete in the browser...")
	}
	defer sp.clear()
	var tick <-chan time.Time
	if sp.tty {
		t := time.NewTicker(spinnerFrame)
		defer t.Stop()
		tick = t.C
		sp.draw(a.waitText(deadline))
	}
	next := time.NewTimer(interval)
	defer next.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return pollData{}, parent.Err()
			}
			return pollData{}, &authError{msg: "timed out waiting for sign-in", hint: `run "svc login" again`}
		case <-tick:
			sp.draw(a.waitText(deadline))
		case <-next.C:
			q := url.Values{"state": {state}}
			resp, err := a.call(ctx, c, api.Request{Method: http.MethodGet, Path: "/api/v1/cli/auth/poll", Query: q}, "")
			if err != nil {
				if ctx.Err() != nil {
					continue // the ctx.Done case reports it
				}
				var apiErr *api.Error
				if errors.As(err, &apiErr) && apiErr.Status < 500 {
					sp.clear()
					return pollData{}, fmt.Errorf("sign-in: %w", err)
				}
				if failures++; failures >= maxPollFailures {
					sp.clear()
					return pollData{}, fmt.Errorf("sign-in: %w", err)
				}
				next.Reset(interval)
				continue
			}
			failures = 0
			var d pollData
			if err := json.Unmarshal(resp.Data, &d); err != nil {
				sp.clear()
				return pollData{}, fmt.Errorf("sign-in: unexpected poll answer: %w", err)
			}
			switch d.Status {
			case "pending":
				next.Reset(interval)
			case "complete":
				sp.clear()
				if d.Token == "" {
					return pollData{}, errors.New("sign-in: completed without a login token")
				}
				return d, nil
			case "expired":
				sp.clear()
				return pollData{}, &authError{msg: "the sign-in link expired before sign-in completed", hint: `run "svc login" again`}
			default:
				sp.clear()
				return pollData{}, fmt.Errorf("sign-in: unexpected status %q", d.Status)
			}
		}
	}
}

func (a *app) waitText(deadline time.Time) string {
	left := time.Until(deadline).Round(time.Second)
	if left < 0 {
		left = 0
	}
	return fmt.Sprintf("Waiting for sign-in in the browser... (%s left, Ctrl-C to cancel)", left)
}

// userLabel picks something human from the poll's user object.
func userLabel(raw json.RawMessage) string {
	var u map[string]any
	if json.Unmarshal(raw, &u) != nil {
		return ""
	}
	for _, k := range []string{"email", "name", "id"} {
		if v, ok := u[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
	}
	return ""
}

func (a *app) logoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Delete the stored login token",
		Args:  noArgs,
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			st, err := a.store()
			if err != nil {
				return err
			}
			existed, err := st.DeleteCredentials()
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"logged_out": existed})
			}
			if existed {
				fmt.Fprintln(a.o.Stdout, "Logged out; the login token was deleted.")
			} else {
				fmt.Fprintln(a.o.Stdout, "Not logged in.")
			}
			return nil
		}),
	}
}
