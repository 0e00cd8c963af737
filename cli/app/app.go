// Package app is the svc command-line client: the command tree, settings
// resolution, output and exit codes. cmd/svc only calls Run with System();
// tests call Run with their own streams, clock, browser opener and config
// directory, so the whole client runs in-process without globals.
package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/svc-dev/svc/cli/internal/api"
	"github.com/svc-dev/svc/cli/internal/config"
)

// Exit codes of the svc command.
const (
	ExitOK          = 0   // success
	ExitError       = 1   // any other failure: 4xx other than 401/403, 429 after retries, local errors
	ExitUsage       = 2   // bad command line: unknown command or flag, wrong arguments, missing required flags without a terminal
	ExitAuth        = 3   // 401/403, not logged in, no program key, sign-in expired or refused
	ExitServer      = 4   // 5xx (except 501), server unreachable or timed out
	ExitInterrupted = 130 // interrupted (Ctrl-C), as shells report SIGINT
)

// Environment variables read by the client.
const (
	EnvBaseURL      = "SVC_BASE_URL"
	EnvAPIKey       = "SVC_API_KEY"
	EnvConfigDir    = "SVC_CONFIG_DIR"
	EnvPollInterval = "SVC_POLL_INTERVAL"
	EnvHTTPTimeout  = "SVC_HTTP_TIMEOUT"
	EnvBrowser      = "BROWSER"

	// DefaultBaseURL is the local stack's gateway (make run).
	DefaultBaseURL = "http://127.0.0.1:8080"
	// DefaultPollInterval paces auth/poll: 30 polls a minute stays well
	// inside the CLI limit of 60 a minute.
	DefaultPollInterval = 2 * time.Second
	// DefaultHTTPTimeout bounds one HTTP call.
	DefaultHTTPTimeout = 30 * time.Second
)

// Options is everything the client takes from its environment.
type Options struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// IsTerminal reports whether a stream (Stdin, Stderr) is an
	// interactive terminal; it decides prompts and the spinner.
	IsTerminal func(stream any) bool
	// OpenURL opens the sign-in link in a browser; errors are reported and
	// never fail the login.
	OpenURL func(ctx context.Context, url string) error
	// HTTPClient makes the API calls; nil means one with SVC_HTTP_TIMEOUT
	// (default 30s) per call.
	HTTPClient *http.Client
	Now        func() time.Time
	// Sleep waits before a retry after 429.
	Sleep func(ctx context.Context, d time.Duration) error
	// UserConfigDir is the per-user config root (os.UserConfigDir); the
	// client's files go in its "svc" subdirectory unless SVC_CONFIG_DIR is set.
	UserConfigDir func() (string, error)
	Version       string
}

// System returns the Options of a real process.
func System() Options {
	return Options{
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Getenv: os.Getenv,
		IsTerminal: func(s any) bool {
			f, ok := s.(*os.File)
			return ok && term.IsTerminal(int(f.Fd()))
		},
		OpenURL:       func(ctx context.Context, u string) error { return openBrowser(os.Getenv, u) },
		Now:           time.Now,
		UserConfigDir: os.UserConfigDir,
		Version:       buildVersion(),
	}
}

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// openBrowser runs $BROWSER, else the platform's opener, without waiting
// for the browser.
func openBrowser(getenv func(string) string, u string) error {
	var name string
	var args []string
	if b := strings.Fields(getenv(EnvBrowser)); len(b) > 0 {
		name, args = b[0], b[1:]
	} else {
		switch runtime.GOOS {
		case "darwin":
			name = "open"
		case "windows":
			name, args = "rundll32", []string{"url.dll,FileProtocolHandler"}
		default:
			name = "xdg-open"
		}
	}
	cmd := exec.Command(name, append(args, u)...)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reap; the CLI does not wait for the browser
	return nil
}

// app is one invocation.
type app struct {
	o           Options
	jsonOut     bool
	baseURLFlag string
	in          *bufio.Reader
}

// Run executes the command line args (without the program name) and
// returns the exit code.
func Run(ctx context.Context, args []string, o Options) int {
	o = withDefaults(o)
	a := &app{o: o, in: bufio.NewReader(o.Stdin)}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(o.Stdin)
	root.SetOut(o.Stdout)
	root.SetErr(o.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var ce *cmdError
	var ue *usageError
	switch {
	case errors.As(err, &ce):
		err = ce.err
	case errors.As(err, &ue):
		// Argument and flag checks (usage.go) already speak our language.
	default:
		// Any other error that did not come out of a command's RunE is
		// cobra's own account of a bad command line.
		path := ""
		if cmd != nil {
			path = cmd.CommandPath()
		}
		err = &usageError{msg: err.Error(), cmd: path}
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		fmt.Fprintln(o.Stderr, "interrupted")
		return ExitInterrupted
	}
	a.printError(err)
	return exitCode(err)
}

func withDefaults(o Options) Options {
	if o.Stdin == nil {
		o.Stdin = strings.NewReader("")
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.IsTerminal == nil {
		o.IsTerminal = func(any) bool { return false }
	}
	if o.OpenURL == nil {
		o.OpenURL = func(context.Context, string) error { return errors.New("no browser available") }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.UserConfigDir == nil {
		o.UserConfigDir = os.UserConfigDir
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	return o
}

// cmdError marks an error returned by a command's own code, as opposed to
// cobra's parsing errors (usage).
type cmdError struct{ err error }

func (e *cmdError) Error() string { return e.err.Error() }
func (e *cmdError) Unwrap() error { return e.err }

// usageError is a bad command line (exit 2); cmd is the command path whose
// help explains it ("svc test"), when known.
type usageError struct{ msg, cmd string }

func (e *usageError) Error() string { return e.msg }

// authError is a local authentication problem (exit 3): not logged in, no
// program key, sign-in expired.
type authError struct{ msg, hint string }

func (e *authError) Error() string { return e.msg }

// hintError adds advice to an error without changing its class.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ue *usageError
	var ae *authError
	var apiErr *api.Error
	var te *api.TransportError
	switch {
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &ae):
		return ExitAuth
	case errors.As(err, &apiErr):
		switch {
		case apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden:
			return ExitAuth
		case apiErr.Status == http.StatusNotImplemented:
			// Not deployed on this server: retrying, the remedy for 5xx,
			// does not help.
			return ExitError
		case apiErr.Status >= 500:
			return ExitServer
		}
		return ExitError
	case errors.As(err, &te):
		return ExitServer
	}
	return ExitError
}

// run wraps a command body so its errors are told apart from cobra's.
func run(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := fn(cmd, args); err != nil {
			return &cmdError{err: err}
		}
		return nil
	}
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "svc",
		Short: "Command-line client of the svc referral attribution service",
		Long: `svc signs you in, creates programs, checks a program's integration and sends test events.

Settings: --base-url or SVC_BASE_URL, else "svc config set base-url", else ` + DefaultBaseURL + `.
Program key: SVC_API_KEY, else "svc config set api-key".

Exit codes: 0 ok, 1 other error, 2 usage, 3 authentication (401/403, not logged in, no key), 4 server error (5xx) or unreachable, 130 interrupted.`,
		Version:       a.o.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		// A bare "svc" with an unknown word is a usage error, not help.
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "print the response data as JSON (for scripts)")
	root.PersistentFlags().StringVar(&a.baseURLFlag, "base-url", "", "API base URL (overrides SVC_BASE_URL and the config file)")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(a.loginCmd(), a.logoutCmd(), a.initCmd(), a.programsCmd(), a.statusCmd(), a.testCmd(), a.listenCmd(), a.configCmd())
	return root
}

// store is the config directory: SVC_CONFIG_DIR, else <user config>/svc.
func (a *app) store() (config.Store, error) {
	if d := a.o.Getenv(EnvConfigDir); d != "" {
		return config.Store{Dir: d}, nil
	}
	root, err := a.o.UserConfigDir()
	if err != nil {
		return config.Store{}, fmt.Errorf("find the user config directory (set %s): %w", EnvConfigDir, err)
	}
	return config.Store{Dir: filepath.Join(root, "svc")}, nil
}

// resolved is the effective settings and where each came from.
type resolved struct {
	store         config.Store
	file          config.Settings
	baseURL       string
	baseURLSource string
	apiKey        string
	apiKeySource  string
}

func (a *app) settings() (resolved, error) {
	st, err := a.store()
	if err != nil {
		return resolved{}, err
	}
	file, err := st.LoadSettings()
	if err != nil {
		return resolved{}, err
	}
	r := resolved{store: st, file: file}
	switch {
	case a.baseURLFlag != "":
		r.baseURL, r.baseURLSource = a.baseURLFlag, "--base-url"
	case a.o.Getenv(EnvBaseURL) != "":
		r.baseURL, r.baseURLSource = a.o.Getenv(EnvBaseURL), EnvBaseURL
	case file.BaseURL != "":
		r.baseURL, r.baseURLSource = file.BaseURL, st.Path(config.ConfigFile)
	default:
		r.baseURL, r.baseURLSource = DefaultBaseURL, "default"
	}
	if a.o.HTTPClient == nil {
		d, err := a.httpTimeout()
		if err != nil {
			return resolved{}, err
		}
		a.o.HTTPClient = api.NewHTTPClient(d)
	}
	r.baseURL = strings.TrimRight(r.baseURL, "/")
	if err := validBaseURL(r.baseURL); err != nil {
		return resolved{}, &usageError{msg: fmt.Sprintf("base URL from %s: %v", r.baseURLSource, err)}
	}
	switch {
	case a.o.Getenv(EnvAPIKey) != "":
		r.apiKey, r.apiKeySource = a.o.Getenv(EnvAPIKey), EnvAPIKey
	case file.APIKey != "":
		r.apiKey, r.apiKeySource = file.APIKey, st.Path(config.ConfigFile)
	}
	return r, nil
}

// httpTimeout reads SVC_HTTP_TIMEOUT as a Go duration or whole seconds.
func (a *app) httpTimeout() (time.Duration, error) {
	return envDuration(a.o.Getenv, EnvHTTPTimeout, DefaultHTTPTimeout)
}

// envDuration reads a positive duration ("2s", "500ms", or whole seconds).
func envDuration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	if n, err := strconv.Atoi(v); err == nil {
		v = strconv.Itoa(n) + "s"
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, &usageError{msg: fmt.Sprintf("%s=%q: want a positive duration such as 30s or 500ms", name, getenv(name))}
	}
	return d, nil
}

func (a *app) client(baseURL string) *api.Client {
	return &api.Client{
		BaseURL:   baseURL,
		HTTP:      a.o.HTTPClient,
		UserAgent: "svc-cli/" + a.o.Version,
		Sleep:     a.o.Sleep,
		Now:       a.o.Now,
		OnRetry: func(wait time.Duration, attempt, max int) {
			fmt.Fprintf(a.o.Stderr, "rate limited; retrying in %s (%d/%d)\n", wait.Round(time.Millisecond), attempt, max)
		},
	}
}

// call sends r and prints the response's warnings; authHint is added to a
// 401/403 so the user knows which credential to fix (Authentication rule 5).
func (a *app) call(ctx context.Context, c *api.Client, r api.Request, authHint string) (*api.Response, error) {
	resp, err := c.Do(ctx, r)
	var apiErr *api.Error
	switch {
	case err == nil:
		a.printWarnings(resp.Warnings)
	case errors.As(err, &apiErr):
		a.printWarnings(apiErr.Warnings)
		// The server's own login prompt ("Run "svc login" and try again.")
		// makes ours redundant.
		if (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden) && authHint != "" &&
			apiErr.Hint == "" && !strings.Contains(apiErr.Message, "svc login") {
			return nil, &hintError{err: err, hint: authHint}
		}
	}
	return resp, err
}

// loginToken returns the stored login token for r's base URL.
func (a *app) loginToken(r resolved) (*config.Credentials, error) {
	c, err := r.store.LoadCredentials()
	if err != nil {
		return nil, err
	}
	if c == nil || c.Token == "" {
		return nil, &authError{msg: "not logged in", hint: `run "svc login"`}
	}
	if strings.TrimRight(c.BaseURL, "/") != r.baseURL {
		return nil, &authError{msg: fmt.Sprintf("logged in to %s, not %s", c.BaseURL, r.baseURL), hint: `run "svc login" to sign in to this server`}
	}
	if !c.ExpiresAt.IsZero() && !a.o.Now().Before(c.ExpiresAt) {
		return nil, &authError{msg: "login expired at " + c.ExpiresAt.Local().Format(time.RFC1123), hint: `run "svc login" again`}
	}
	return c, nil
}

// programKey returns the program API key for status and test events.
func (a *app) programKey(r resolved) (string, error) {
	if r.apiKey == "" {
		return "", &authError{msg: "no program API key", hint: `set one with "svc config set api-key" or ` + EnvAPIKey + `, or create a program with "svc init"`}
	}
	return r.apiKey, nil
}

const (
	hintLogin      = `run "svc login" to sign in again`
	hintProgramKey = `use a valid program API key ("svc config set api-key" or ` + EnvAPIKey + `); signing in again does not fix a key`
)

func (a *app) printWarnings(ws []api.Warning) {
	for _, w := range ws {
		var b strings.Builder
		b.WriteString("warning: ")
		if w.Code != "" {
			b.WriteString(w.Code + ": ")
		}
		b.WriteString(w.Message)
		if w.RotateBy != "" {
			fmt.Fprintf(&b, " (rotate by %s)", w.RotateBy)
		}
		for _, extra := range []string{w.Hint, w.DocsURL} {
			if extra != "" {
				b.WriteString("\n  " + extra)
			}
		}
		fmt.Fprintln(a.o.Stderr, b.String())
	}
}

// printError writes err to stderr: error.code first when present, else the
// message; then the hint and the request id.
func (a *app) printError(err error) {
	var hint string
	var he *hintError
	if errors.As(err, &he) {
		hint = he.hint
	}
	var ae *authError
	if errors.As(err, &ae) {
		hint = ae.hint
	}
	var apiErr *api.Error
	isAPI := errors.As(err, &apiErr)
	if isAPI && apiErr.Hint != "" {
		hint = apiErr.Hint
	}
	if a.jsonOut {
		e := map[string]any{"message": err.Error()}
		if isAPI {
			e = map[string]any{"status": apiErr.Status, "message": apiErr.Message}
			if apiErr.Code != "" {
				e["code"] = apiErr.Code
			}
			if apiErr.RequestID != "" {
				e["request_id"] = apiErr.RequestID
			}
			if apiErr.DocsURL != "" {
				e["docs_url"] = apiErr.DocsURL
			}
			if d := publicDetails(apiErr.Details); len(d) > 0 {
				e["details"] = d
			}
			if apiErr.RetryAfter > 0 && apiErr.Status == http.StatusTooManyRequests {
				e["retry_after_seconds"] = int(apiErr.RetryAfter.Seconds())
			}
		}
		if hint != "" {
			e["hint"] = hint
		}
		e["exit_code"] = exitCode(err)
		b, _ := json.Marshal(map[string]any{"error": e})
		fmt.Fprintln(a.o.Stderr, string(b))
		return
	}
	fmt.Fprintf(a.o.Stderr, "error: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		help := "svc"
		if ue.cmd != "" {
			help = ue.cmd
		}
		fmt.Fprintf(a.o.Stderr, "run %q for usage\n", help+" --help")
	}
	if isAPI && apiErr.DocsURL != "" {
		fmt.Fprintf(a.o.Stderr, "docs: %s\n", apiErr.DocsURL)
	}
	if isAPI {
		if steps, ok := apiErr.Details["chain"].([]any); ok {
			// An incomplete synthetic chain says which steps ran.
			for _, s := range steps {
				if m, ok := s.(map[string]any); ok {
					fmt.Fprintf(a.o.Stderr, "  %s: %s%s\n", field(m, "step"), field(m, "status"), eventSuffix(m))
				}
			}
		}
	}
	if hint != "" {
		fmt.Fprintf(a.o.Stderr, "hint: %s\n", hint)
	}
	if isAPI && apiErr.RequestID != "" {
		fmt.Fprintf(a.o.Stderr, "request id: %s\n", apiErr.RequestID)
	}
}

// publicDetails is error.details without what is printed elsewhere.
func publicDetails(d map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range d {
		if k != "request_id" && k != "code" {
			out[k] = v
		}
	}
	return out
}

// printJSON writes v indented to stdout.
func (a *app) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = fmt.Fprintln(a.o.Stdout, string(b))
	return err
}

func (a *app) stdinTTY() bool  { return a.o.IsTerminal(a.o.Stdin) }
func (a *app) stderrTTY() bool { return a.o.IsTerminal(a.o.Stderr) && a.o.Getenv("TERM") != "dumb" }

// maskKey shows enough of a key to tell keys apart, never the secret part.
func maskKey(k string) string {
	const head, tail = 13, 4 // "svc_live_" + 4, as the server stores in clear
	if len(k) <= head+tail+4 {
		if len(k) <= 4 {
			return strings.Repeat("*", len(k))
		}
		return k[:2] + strings.Repeat("*", len(k)-2)
	}
	return k[:head] + "…" + k[len(k)-tail:]
}
