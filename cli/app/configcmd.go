package app

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/svc-dev/svc/cli/internal/config"
)

// Config keys of `svc config get|set|unset`.
const (
	keyBaseURL = "base-url"
	keyAPIKey  = "api-key"
)

func validBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL such as %s", s, DefaultBaseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: a base URL has no query or fragment", s)
	}
	return nil
}

// configKeyArg accepts one setting name.
func configKeyArg() cobra.PositionalArgs { return oneOf("setting", keyBaseURL, keyAPIKey) }

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show or change the base URL and the default program key",
		Long: `Without a subcommand, shows the effective settings and where each comes from.
Settings live in <user config dir>/svc/config.json (mode 0600); SVC_BASE_URL and SVC_API_KEY override them.`,
		Args: noArgs,
		RunE: run(func(cmd *cobra.Command, _ []string) error { return a.showConfig() }),
	}
	get := &cobra.Command{
		Use:   "get base-url|api-key",
		Short: "Print one effective setting (the key masked)",
		Args:  configKeyArg(),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			r, err := a.settings()
			if err != nil {
				return err
			}
			v := r.baseURL
			if args[0] == keyAPIKey {
				if r.apiKey == "" {
					return errors.New("api-key is not set")
				}
				v = maskKey(r.apiKey)
			}
			if a.jsonOut {
				return a.printJSON(map[string]string{strings.ReplaceAll(args[0], "-", "_"): v})
			}
			fmt.Fprintln(a.o.Stdout, v)
			return nil
		}),
	}
	set := &cobra.Command{
		Use:   "set base-url <url> | set api-key [<key>]",
		Short: "Save a setting (api-key without a value reads it from stdin, hidden in a terminal)",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := configKeyArg()(cmd, args[:min(len(args), 1)]); err != nil {
				return err
			}
			switch {
			case len(args) > 2:
				return &usageError{msg: fmt.Sprintf("svc config set takes a setting and one value, got %d arguments", len(args)), cmd: cmd.CommandPath()}
			case args[0] == keyBaseURL && len(args) != 2:
				return &usageError{msg: "set base-url needs a URL, e.g. svc config set base-url " + DefaultBaseURL, cmd: cmd.CommandPath()}
			}
			return nil
		},
		RunE: run(func(cmd *cobra.Command, args []string) error { return a.setConfig(args) }),
	}
	unset := &cobra.Command{
		Use:   "unset base-url|api-key",
		Short: "Remove a saved setting",
		Args:  configKeyArg(),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			st, err := a.store()
			if err != nil {
				return err
			}
			file, err := st.LoadSettings()
			if err != nil {
				return err
			}
			if args[0] == keyBaseURL {
				file.BaseURL = ""
			} else {
				file.APIKey = ""
			}
			if err := st.SaveSettings(file); err != nil {
				return err
			}
			if !a.jsonOut {
				fmt.Fprintf(a.o.Stdout, "Removed %s.\n", args[0])
			}
			return nil
		}),
	}
	cmd.AddCommand(get, set, unset)
	return cmd
}

func (a *app) setConfig(args []string) error {
	st, err := a.store()
	if err != nil {
		return err
	}
	file, err := st.LoadSettings()
	if err != nil {
		return err
	}
	switch args[0] {
	case keyBaseURL:
		v := strings.TrimRight(strings.TrimSpace(args[1]), "/")
		if err := validBaseURL(v); err != nil {
			return &usageError{msg: err.Error()}
		}
		file.BaseURL = v
	case keyAPIKey:
		var v string
		if len(args) == 2 {
			v = args[1]
		} else {
			v, err = a.readSecret("Program API key")
			if err != nil {
				return err
			}
		}
		v = strings.TrimSpace(v)
		if v == "" || strings.ContainsAny(v, " \t\r\n") {
			return &usageError{msg: "the API key must be one non-empty word"}
		}
		file.APIKey = v
	}
	if err := st.SaveSettings(file); err != nil {
		return err
	}
	if a.jsonOut {
		return nil
	}
	shown := file.BaseURL
	env := EnvBaseURL
	if args[0] == keyAPIKey {
		shown, env = maskKey(file.APIKey), EnvAPIKey
	}
	fmt.Fprintf(a.o.Stdout, "Saved %s %s in %s.\n", args[0], shown, st.Path(config.ConfigFile))
	if a.o.Getenv(env) != "" {
		fmt.Fprintf(a.o.Stderr, "Note: %s is set and takes precedence.\n", env)
	}
	return nil
}

// readSecret reads one line from stdin, without echo on a terminal, so a key
// stays out of shell history and the screen.
func (a *app) readSecret(question string) (string, error) {
	if f, ok := a.o.Stdin.(*os.File); ok && a.stdinTTY() {
		fmt.Fprintf(a.o.Stderr, "%s (input hidden): ", question)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.o.Stderr)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", strings.ToLower(question), err)
		}
		return string(b), nil
	}
	line, err := a.in.ReadString('\n')
	if err != nil && strings.TrimSpace(line) == "" {
		return "", &usageError{msg: "no API key given (pass it as an argument or on stdin)"}
	}
	return line, nil
}

func (a *app) showConfig() error {
	r, err := a.settings()
	if err != nil {
		return err
	}
	cred, err := r.store.LoadCredentials()
	if err != nil {
		return err
	}
	login := "not logged in"
	loggedIn := false
	if cred != nil && cred.Token != "" {
		switch {
		case strings.TrimRight(cred.BaseURL, "/") != r.baseURL:
			login = "logged in to " + cred.BaseURL + " (not this base URL)"
		case !cred.ExpiresAt.IsZero() && !a.o.Now().Before(cred.ExpiresAt):
			login = "login expired"
		default:
			loggedIn = true
			login = "logged in"
			if who := userLabel(cred.User); who != "" {
				login += " as " + who
			}
		}
	}
	key, keySource := "(not set)", "-"
	if r.apiKey != "" {
		key, keySource = maskKey(r.apiKey), r.apiKeySource
	}
	if a.jsonOut {
		out := map[string]any{
			"base_url":        r.baseURL,
			"base_url_source": r.baseURLSource,
			"api_key":         nil,
			"config_dir":      r.store.Dir,
			"logged_in":       loggedIn,
		}
		if r.apiKey != "" {
			out["api_key"] = key
			out["api_key_source"] = keySource
		}
		if loggedIn && len(cred.User) > 0 {
			out["user"] = cred.User
		}
		return a.printJSON(out)
	}
	w := a.o.Stdout
	fmt.Fprintf(w, "base-url  %s  (%s)\n", r.baseURL, r.baseURLSource)
	fmt.Fprintf(w, "api-key   %s  (%s)\n", key, keySource)
	fmt.Fprintf(w, "login     %s\n", login)
	fmt.Fprintf(w, "config    %s\n", r.store.Dir)
	return nil
}
