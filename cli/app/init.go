package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/cli/internal/api"
	"github.com/svc-dev/svc/cli/internal/config"
)

// commissionTypes are the contract's commission_type values.
func commissionTypes() []string {
	return []string{"percent", "fixed", "recurring_percent", "recurring_fixed"}
}

type initFlags struct {
	name, domain, commissionType, advertiserID string
	commissionRate                             float64
	durationMonths, cookieDuration             int
	saveKey                                    bool
}

func (a *app) initCmd() *cobra.Command {
	var f initFlags
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a program and its first API key",
		Long: `Creates a program for your account (requires "svc login") and prints its API key once.
--name, --domain, --commission-type and --commission-rate are required; in a terminal, missing ones are asked for.`,
		Example: `  svc init --name "Acme partners" --domain acme.example --commission-type percent --commission-rate 20 --cookie-duration 30`,
		Args:    cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return a.initProgram(cmd, f)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "program name (required)")
	fl.StringVar(&f.domain, "domain", "", "the brand's site domain, e.g. acme.example (required)")
	fl.StringVar(&f.commissionType, "commission-type", "", "one of "+strings.Join(commissionTypes(), ", ")+" (required)")
	fl.Float64Var(&f.commissionRate, "commission-rate", 0, "percentage for percent types (0 < rate <= 100), amount for fixed types (required)")
	fl.IntVar(&f.durationMonths, "duration-months", 0, "months a partner earns on a customer; 0 = lifetime")
	fl.IntVar(&f.cookieDuration, "cookie-duration", 0, "attribution cookie lifetime in days, 1 to 365")
	fl.StringVar(&f.advertiserID, "advertiser-id", "", "your advertiser id (optional; must match your account)")
	fl.BoolVar(&f.saveKey, "save-key", false, "save the new API key as the default program key (asked in a terminal when not given)")
	return cmd
}

func (a *app) initProgram(cmd *cobra.Command, f initFlags) error {
	ctx := cmd.Context()
	fl := cmd.Flags()
	r, err := a.settings()
	if err != nil {
		return err
	}
	cred, err := a.loginToken(r)
	if err != nil {
		return err
	}
	if err := a.askMissing(fl.Changed, &f); err != nil {
		return err
	}
	body := map[string]any{
		"name":            f.name,
		"domain":          f.domain,
		"commission_type": f.commissionType,
		"commission_rate": f.commissionRate,
	}
	if fl.Changed("duration-months") {
		body["duration_months"] = f.durationMonths
	}
	if fl.Changed("cookie-duration") {
		body["cookie_duration"] = f.cookieDuration
	}
	if fl.Changed("advertiser-id") {
		// Ids are integers in the API; anything else is passed through for
		// the server to judge.
		if n, err := strconv.ParseInt(f.advertiserID, 10, 64); err == nil {
			body["advertiser_id"] = n
		} else {
			body["advertiser_id"] = f.advertiserID
		}
	}
	resp, err := a.call(ctx, a.client(r.baseURL), api.Request{Method: http.MethodPost, Path: "/api/v1/cli/init", Token: cred.Token, Body: body}, hintLogin)
	if err != nil {
		return err
	}
	var out struct {
		Program map[string]any  `json:"program"`
		APIKey  json.RawMessage `json:"api_key"`
	}
	if err := json.Unmarshal(resp.Data, &out); err != nil {
		return fmt.Errorf("init: unexpected answer: %w", err)
	}
	key := keyValue(out.APIKey)

	if a.jsonOut {
		if err := a.printJSON(resp.Data); err != nil {
			return err
		}
	} else {
		w := a.o.Stdout
		fmt.Fprintf(w, "Created program %s: %s (%s)\n", field(out.Program, "id"), field(out.Program, "name"), field(out.Program, "domain"))
		fmt.Fprintf(w, "  Commission: %s\n", commissionText(out.Program))
		if key != "" {
			fmt.Fprintf(w, "\nAPI key (shown only this once; store it somewhere safe):\n\n  %s\n\n", key)
		}
	}
	if key == "" {
		return nil
	}
	save := f.saveKey
	if !fl.Changed("save-key") {
		save = a.stdinTTY() && a.confirm("Save this API key as the default program key for svc status and svc test?", true)
	}
	if !save {
		if !a.jsonOut {
			fmt.Fprintf(a.o.Stderr, "Not saved. To use it by default: svc config set api-key (or export %s).\n", EnvAPIKey)
		}
		return nil
	}
	file := r.file
	file.APIKey = key
	if err := r.store.SaveSettings(file); err != nil {
		return err
	}
	fmt.Fprintf(a.o.Stderr, "Saved as the default program key in %s.\n", r.store.Path(config.ConfigFile))
	if a.o.Getenv(EnvAPIKey) != "" {
		fmt.Fprintf(a.o.Stderr, "Note: %s is set and takes precedence over the saved key.\n", EnvAPIKey)
	}
	if !a.jsonOut {
		fmt.Fprintln(a.o.Stdout, `Next: "svc status" to check the integration, "svc test click" to send a test click.`)
	}
	return nil
}

// askMissing prompts for required flags that were not given when stdin is a
// terminal, and is a usage error listing them otherwise.
func (a *app) askMissing(changed func(string) bool, f *initFlags) error {
	type ask struct {
		flag, question string
		set            func(string) error
	}
	notEmpty := func(s string) error {
		if s == "" {
			return errors.New("a value is required")
		}
		return nil
	}
	asks := []ask{
		{"name", "Program name", func(s string) error { f.name = s; return notEmpty(s) }},
		{"domain", "Site domain (e.g. acme.example)", func(s string) error { f.domain = s; return notEmpty(s) }},
		{"commission-type", "Commission type (" + strings.Join(commissionTypes(), ", ") + ")", func(s string) error {
			if !slices.Contains(commissionTypes(), s) {
				return fmt.Errorf("choose one of %s", strings.Join(commissionTypes(), ", "))
			}
			f.commissionType = s
			return nil
		}},
		{"commission-rate", "Commission rate (percentage for percent types, amount for fixed)", func(s string) error {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v <= 0 {
				return errors.New("enter a positive number")
			}
			f.commissionRate = v
			return nil
		}},
	}
	var missing []ask
	for _, q := range asks {
		if !changed(q.flag) {
			missing = append(missing, q)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !a.stdinTTY() {
		names := make([]string, len(missing))
		for i, q := range missing {
			names[i] = "--" + q.flag
		}
		return &usageError{msg: "missing required flags: " + strings.Join(names, ", ") + " (or run in a terminal to be asked)"}
	}
	for _, q := range missing {
		if _, err := a.prompt(q.question, q.flag, q.set); err != nil {
			return err
		}
	}
	return nil
}

// keyValue reads api_key as a string or an object holding the key.
func keyValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		for _, k := range []string{"key", "api_key", "value", "token"} {
			if v, ok := m[k].(string); ok {
				return v
			}
		}
	}
	return ""
}

// field renders m[k] for humans; "-" when absent.
func field(m map[string]any, k string) string {
	v, ok := m[k]
	if !ok || v == nil {
		return "-"
	}
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

func commissionText(p map[string]any) string {
	t := field(p, "commission_type")
	rate := field(p, "commission_rate")
	var s string
	switch t {
	case "percent", "recurring_percent":
		s = rate + "% " + strings.ReplaceAll(t, "_", " ")
	default:
		s = rate + " " + strings.ReplaceAll(t, "_", " ")
	}
	if d, ok := p["duration_months"].(float64); ok {
		if d == 0 {
			s += ", lifetime"
		} else {
			s += fmt.Sprintf(", %s months", field(p, "duration_months"))
		}
	}
	if _, ok := p["cookie_duration"]; ok && p["cookie_duration"] != nil {
		s += ", cookie " + field(p, "cookie_duration") + " days"
	}
	return s
}
