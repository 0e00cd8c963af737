package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
		Args:    noArgs,
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
	// The spec stores cookie_duration and nothing reads it: the tracker's
	// cookie lives as long as the attribution window. The help says so, so
	// nobody expects it to change how long a click counts.
	fl.IntVar(&f.cookieDuration, "cookie-duration", 0, "days, 1 to 365, stored with the program as its cookie duration; the tracker's cookie lasts the program's attribution window (60 days unless changed), not this value")
	fl.StringVar(&f.advertiserID, "advertiser-id", "", "your advertiser id (optional; must match your account)")
	fl.BoolVar(&f.saveKey, "save-key", false, "save the new API key as the default program key (asked in a terminal when not given)")
	setExample(cmd, "commission-rate", "20")
	setExample(cmd, "duration-months", "12")
	setExample(cmd, "cookie-duration", "30")
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
	sent := map[string]bool{}
	for _, name := range []string{"duration-months", "cookie-duration", "advertiser-id"} {
		sent[name] = fl.Changed(name)
	}
	fields := a.initFields(&f, sent)
	asked, err := a.askMissing(fl.Changed, fields)
	if err != nil {
		return err
	}
	// Interactive: the user is answering prompts, so a field the server
	// refuses is asked again instead of losing every answer. A command line
	// of flags, --json and pipes keep failing with the server's message.
	interactive := asked && a.stdinTTY() && !a.jsonOut
	var resp *api.Response
	for {
		resp, err = a.call(ctx, a.client(r.baseURL), api.Request{Method: http.MethodPost, Path: "/api/v1/cli/init", Token: cred.Token, Body: f.body(sent)}, hintLogin)
		if err == nil {
			break
		}
		q, ok := refusedField(err, fields)
		if !interactive || !ok {
			return err
		}
		var apiErr *api.Error
		errors.As(err, &apiErr)
		fmt.Fprintf(a.o.Stderr, "  The server refused %s: %s\n", q.key, apiErr.Message)
		if _, err := a.prompt(q.question, q.flag, q.set); err != nil {
			return err
		}
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

// body is the POST init request; the optional fields are sent only when
// given (sent) so the server's defaults apply otherwise.
func (f *initFlags) body(sent map[string]bool) map[string]any {
	body := map[string]any{
		"name":            f.name,
		"domain":          f.domain,
		"commission_type": f.commissionType,
		"commission_rate": f.commissionRate,
	}
	if sent["duration-months"] {
		body["duration_months"] = f.durationMonths
	}
	if sent["cookie-duration"] {
		body["cookie_duration"] = f.cookieDuration
	}
	if sent["advertiser-id"] {
		// Ids are integers in the API; anything else is passed through for
		// the server to judge.
		if n, err := strconv.ParseInt(f.advertiserID, 10, 64); err == nil {
			body["advertiser_id"] = n
		} else {
			body["advertiser_id"] = f.advertiserID
		}
	}
	return body
}

// initField is one answer of init: its flag, its key in the request body,
// the question asked for it and set, which checks a typed answer with the
// contract's rules (Resources, Program; Limits, Other constants) and stores
// it.
type initField struct {
	flag, key, question string
	required            bool
	set                 func(string) error
}

func (a *app) initFields(f *initFlags, sent map[string]bool) []initField {
	return []initField{
		{"name", "name", "Program name", true, func(s string) error {
			if s == "" {
				return errors.New("a value is required")
			}
			if utf8.RuneCountInString(s) > maxNameLen {
				return fmt.Errorf("a name has at most %d characters", maxNameLen)
			}
			f.name = s
			return nil
		}},
		{"domain", "domain", "Site domain (e.g. acme.example)", true, func(s string) error {
			host, fromURL, err := checkDomain(s)
			if err != nil {
				return err
			}
			if fromURL {
				fmt.Fprintf(a.o.Stderr, "  That is a URL; using its host name %s as the domain.\n", host)
			}
			f.domain = host
			return nil
		}},
		{"commission-type", "commission_type", "Commission type (" + strings.Join(commissionTypes(), ", ") + ")", true, func(s string) error {
			t := strings.NewReplacer(" ", "_", "-", "_").Replace(strings.ToLower(s))
			if !slices.Contains(commissionTypes(), t) {
				return fmt.Errorf("choose one of %s", strings.Join(commissionTypes(), ", "))
			}
			f.commissionType = t
			return nil
		}},
		{"commission-rate", "commission_rate", "Commission rate (percentage for percent types, amount for fixed)", true, func(s string) error {
			v, err := checkRate(s, f.commissionType)
			if err != nil {
				return err
			}
			f.commissionRate = v
			return nil
		}},
		{"duration-months", "duration_months", "Months a partner earns on a customer (0 = lifetime)", false, func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return errors.New("enter a whole number of months, 0 or more (0 = lifetime)")
			}
			f.durationMonths, sent["duration-months"] = n, true
			return nil
		}},
		{"cookie-duration", "cookie_duration", "Cookie duration in days, stored with the program (1 to 365)", false, func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < minCookieDays || n > maxCookieDays {
				return fmt.Errorf("enter a whole number of days from %d to %d", minCookieDays, maxCookieDays)
			}
			f.cookieDuration, sent["cookie-duration"] = n, true
			return nil
		}},
	}
}

// Limits of init's fields (spec: Resources, Program; Limits, Other
// constants; the accounts service's name length).
const (
	maxNameLen     = 200
	maxPercentRate = 100
	minCookieDays  = 1
	maxCookieDays  = 365
	maxDomainLen   = 253
)

func isPercentType(t string) bool { return t == "percent" || t == "recurring_percent" }

// checkRate reads a positive number; for the percent types it is a
// percentage, at most 100, and may be typed with a trailing "%".
func checkRate(s, commissionType string) (float64, error) {
	pct := isPercentType(commissionType)
	if pct {
		s = strings.TrimSpace(strings.TrimSuffix(s, "%"))
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		if pct {
			return 0, errors.New("enter a percentage above 0 and at most 100, e.g. 20")
		}
		return 0, errors.New("enter a positive number, e.g. 5")
	}
	if pct && v > maxPercentRate {
		return 0, fmt.Errorf("%s is a percentage: enter a number above 0 and at most 100, e.g. 20", commissionType)
	}
	return v, nil
}

// hostRe is the accounts service's host name rule: labels of letters,
// digits and hyphens, and an optional port.
var hostRe = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*(:[0-9]{1,5})?$`)

// checkDomain reads a bare host name. A URL is accepted by taking its host
// (fromURL), since that is what someone pasting their site's address means.
func checkDomain(s string) (host string, fromURL bool, err error) {
	if s == "" {
		return "", false, errors.New("a value is required")
	}
	bad := fmt.Errorf("%q is not a host name: enter one like shop.example.com", s)
	host = strings.ToLower(s)
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@") {
		raw := s
		if !strings.Contains(s, "://") {
			raw = "https://" + s
		}
		u, perr := url.Parse(raw)
		if perr != nil || u.Host == "" {
			return "", false, bad
		}
		host, fromURL = strings.ToLower(u.Host), true
	}
	if len(host) > maxDomainLen || !hostRe.MatchString(host) {
		return "", false, bad
	}
	return host, fromURL, nil
}

// refusedField is the field a 400 from init names, when it is one the user
// can answer again. The contract's messages name their field ("Invalid
// commission_type: …", "commission_rate must be …", "cookie_duration …",
// "domain must be …"); "Missing required fields: …" names them all and so
// none.
func refusedField(err error, fields []initField) (initField, bool) {
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || strings.HasPrefix(apiErr.Message, "Missing required fields") {
		return initField{}, false
	}
	if k, ok := apiErr.Details["field"].(string); ok {
		for _, q := range fields {
			if q.key == k {
				return q, true
			}
		}
	}
	best, at := initField{}, -1
	for _, q := range fields {
		m := regexp.MustCompile(`\b` + q.key + `\b`).FindStringIndex(apiErr.Message)
		if m != nil && (at < 0 || m[0] < at) {
			best, at = q, m[0]
		}
	}
	return best, at >= 0
}

// askMissing prompts for the required fields whose flags were not given
// when stdin is a terminal, and is a usage error listing them otherwise.
// asked says whether anything was asked.
func (a *app) askMissing(changed func(string) bool, fields []initField) (asked bool, err error) {
	var missing []initField
	for _, q := range fields {
		if q.required && !changed(q.flag) {
			missing = append(missing, q)
		}
	}
	if len(missing) == 0 {
		return false, nil
	}
	if !a.stdinTTY() {
		names := make([]string, len(missing))
		for i, q := range missing {
			names[i] = "--" + q.flag
		}
		return false, &usageError{msg: "missing required flags: " + strings.Join(names, ", ") + " (or run in a terminal to be asked)"}
	}
	for _, q := range missing {
		if _, err := a.prompt(q.question, q.flag, q.set); err != nil {
			return true, err
		}
	}
	return true, nil
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

// commissionText renders a program's commission for people: "20% of each
// sale for life", "5 per sale for 6 months", "20% recurring for 12 months".
// The rate is a percentage for the percent types; for the fixed types it is
// an amount in the currency of the sale (a program has no currency of its
// own, so no symbol is shown).
func commissionText(p map[string]any) string {
	t := field(p, "commission_type")
	rate := field(p, "commission_rate")
	var s string
	switch t {
	case "percent":
		s = rate + "% of each sale"
	case "recurring_percent":
		s = rate + "% recurring"
	case "fixed":
		s = amountText(p["commission_rate"]) + " per sale"
	case "recurring_fixed":
		s = amountText(p["commission_rate"]) + " per payment, recurring"
	default:
		s = rate + " " + strings.ReplaceAll(t, "_", " ")
	}
	switch d, ok := p["duration_months"].(float64); {
	case !ok:
	case d == 0:
		s += " for life"
	case d == 1:
		s += " for 1 month"
	default:
		s += " for " + field(p, "duration_months") + " months"
	}
	if c, ok := p["cookie_duration"].(float64); ok {
		s += fmt.Sprintf(", cookie duration %s days", strconv.FormatFloat(c, 'f', -1, 64))
	}
	return s
}

// amountText shows a fixed commission amount with two decimals when it has
// cents ("5.50"), as it was given otherwise ("5", "0.1234").
func amountText(v any) string {
	var x float64
	switch n := v.(type) {
	case float64:
		x = n
	case string:
		f, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return n
		}
		x = f
	default:
		return field(map[string]any{"v": v}, "v")
	}
	if x == math.Trunc(x) {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	if c := x * 100; math.Abs(c-math.Round(c)) < 1e-9 {
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}
