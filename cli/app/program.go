package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/cli/internal/api"
)

func (a *app) programsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "programs",
		Short: "List your account's programs",
		Args:  noArgs,
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			r, err := a.settings()
			if err != nil {
				return err
			}
			cred, err := a.loginToken(r)
			if err != nil {
				return err
			}
			resp, err := a.call(cmd.Context(), a.client(r.baseURL), api.Request{Method: http.MethodGet, Path: "/api/v1/cli/programs", Token: cred.Token}, hintLogin)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(resp.Data)
			}
			var progs []map[string]any
			if err := json.Unmarshal(resp.Data, &progs); err != nil {
				return fmt.Errorf("programs: unexpected answer: %w", err)
			}
			if len(progs) == 0 {
				fmt.Fprintln(a.o.Stdout, `No programs yet. Create one with "svc init".`)
				return nil
			}
			tw := tabwriter.NewWriter(a.o.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tDOMAIN\tCOMMISSION")
			for _, p := range progs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", field(p, "id"), field(p, "name"), field(p, "domain"), commissionText(p))
			}
			return tw.Flush()
		}),
	}
}

// statusData is GET /api/v1/cli/status, the shape of the dashboard's
// GET /api/tracking/status/:programId.
type statusData struct {
	ProgramID    json.RawMessage `json:"programId"`
	StepStatuses struct {
		Pageview  string `json:"pageview"`
		Referrals string `json:"referrals"`
		Payments  string `json:"payments"`
	} `json:"stepStatuses"`
	Statistics struct {
		Pageview  stepStats `json:"pageview"`
		Referrals stepStats `json:"referrals"`
		Payments  struct {
			PaymentTrackingMode       string  `json:"paymentTrackingMode"`
			MethodReady               bool    `json:"methodReady"`
			ProcessorConnectionStatus string  `json:"processorConnectionStatus"`
			IsProcessorConnected      bool    `json:"isProcessorConnected"`
			ProcessorAccountID        *string `json:"processorAccountId"`
			ChargesEnabled            bool    `json:"chargesEnabled"`
			PayoutsEnabled            bool    `json:"payoutsEnabled"`
			DetailsSubmitted          bool    `json:"detailsSubmitted"`
			ConnectionDate            *string `json:"connectionDate"`
		} `json:"payments"`
	} `json:"statistics"`
	HasPartners bool   `json:"hasPartners"`
	LastUpdated string `json:"lastUpdated"`
}

type stepStats struct {
	TestEventCount  int  `json:"testEventCount"`
	HasTestEvents   bool `json:"hasTestEvents"`
	LatestTestEvent *struct {
		ID        json.RawMessage `json:"id"`
		Timestamp string          `json:"timestamp"`
		CreatedAt string          `json:"createdAt"`
	} `json:"latestTestEvent"`
}

func (s stepStats) text() string {
	if !s.HasTestEvents {
		return "no test events yet"
	}
	n := fmt.Sprintf("%d test events", s.TestEventCount)
	if s.TestEventCount == 1 {
		n = "1 test event"
	} else if s.TestEventCount >= 10 {
		n = "10+ test events" // the server counts up to 10
	}
	if s.LatestTestEvent != nil && s.LatestTestEvent.Timestamp != "" {
		n += ", latest " + s.LatestTestEvent.Timestamp
	}
	return n
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the program's integration status (uses the program API key)",
		Args:  noArgs,
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			r, err := a.settings()
			if err != nil {
				return err
			}
			key, err := a.programKey(r)
			if err != nil {
				return err
			}
			resp, err := a.call(cmd.Context(), a.client(r.baseURL), api.Request{Method: http.MethodGet, Path: "/api/v1/cli/status", Token: key}, hintProgramKey)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(resp.Data)
			}
			var s statusData
			if err := json.Unmarshal(resp.Data, &s); err != nil {
				return fmt.Errorf("status: unexpected answer: %w", err)
			}
			a.printStatus(s, r.baseURL)
			return nil
		}),
	}
}

func (a *app) printStatus(s statusData, baseURL string) {
	w := a.o.Stdout
	id := strings.Trim(string(s.ProgramID), `"`)
	fmt.Fprintf(w, "Program %s integration status\n\n", id)
	pay := s.Statistics.Payments
	payText := "mode " + pay.PaymentTrackingMode
	switch {
	case pay.IsProcessorConnected:
		payText += ", processor connected"
		if pay.ProcessorAccountID != nil {
			payText += " (" + *pay.ProcessorAccountID + ")"
		}
	case pay.PaymentTrackingMode == "s2s":
		payText += ", server-to-server sale tracking"
	default:
		payText += ", processor not connected"
	}
	partners := "none approved yet"
	if s.HasPartners {
		partners = "at least one approved"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  Page views (test click)\t%s\t%s\n", s.StepStatuses.Pageview, s.Statistics.Pageview.text())
	fmt.Fprintf(tw, "  Referrals (test lead)\t%s\t%s\n", s.StepStatuses.Referrals, s.Statistics.Referrals.text())
	fmt.Fprintf(tw, "  Payments\t%s\t%s\n", s.StepStatuses.Payments, payText)
	fmt.Fprintf(tw, "  Partners\t\t%s\n", partners)
	_ = tw.Flush()
	if s.LastUpdated != "" {
		fmt.Fprintf(w, "\nUpdated %s\n", s.LastUpdated)
	}
	var next []string
	if s.StepStatuses.Pageview != "complete" {
		next = append(next, `"svc test click" sends a test click`)
	}
	if s.StepStatuses.Referrals != "complete" {
		next = append(next, `"svc test lead" sends a test lead`)
	}
	if s.StepStatuses.Payments != "complete" {
		next = append(next, paymentsNext(baseURL, id))
	}
	if len(next) > 0 {
		fmt.Fprintln(w, "\nNext:")
		for _, n := range next {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
}

// paymentsNext is what completes the payments step: connecting the payment
// processor or switching the program to server-to-server sale tracking,
// both in the dashboard. svc has no command for either: the settings route
// takes a dashboard session, which svc does not hold (its login token and
// program keys are refused there), and the processor's connect flow runs in
// a browser. The dashboard signs in with the same account as svc login, so
// its link is something a person can follow; a curl needing a session
// token they were never given is not.
func paymentsNext(baseURL, programID string) string {
	return `connect your payment processor, or switch program ` + programID + ` to server-to-server sale tracking (s2s),
    in the dashboard's Settings (sign in with the account you used for "svc login"):
      ` + strings.TrimRight(baseURL, "/") + `/dashboard/
    then "svc test sale" sends a test sale`
}

func (a *app) testCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "test click|lead|sale|chain",
		Short: "Send a test event through the real tracking path (uses the program API key)",
		Long: `Sends one test event for the program of the API key: a test click, a test lead, a test sale
(creates no commission), or "chain", a synthetic click → lead → sale on test fixtures (at most 10 per program per hour).`,
		ValidArgs: testEvents(),
		Args:      oneOf("test event", testEvents()...),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			r, err := a.settings()
			if err != nil {
				return err
			}
			key, err := a.programKey(r)
			if err != nil {
				return err
			}
			kind := args[0]
			body := map[string]any{"event_type": kind}
			if kind == "chain" {
				body = map[string]any{"type": "chain"}
			}
			resp, err := a.call(cmd.Context(), a.client(r.baseURL), api.Request{Method: http.MethodPost, Path: "/api/v1/cli/test-event", Token: key, Body: body}, hintProgramKey)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(resp.Data)
			}
			a.printTestEvent(kind, resp.Data)
			return nil
		}),
	}
}

// testEvents are the arguments of svc test.
func testEvents() []string { return []string{"click", "lead", "sale", "chain"} }

// testEventData is POST /api/v1/cli/test-event's data: one event, or a
// synthetic chain's steps.
type testEventData struct {
	EventType string           `json:"event_type"`
	EventID   json.RawMessage  `json:"eventId"`
	ProgramID json.RawMessage  `json:"programId"`
	Message   string           `json:"message"`
	Chain     []map[string]any `json:"chain"`
}

func (a *app) printTestEvent(kind string, raw json.RawMessage) {
	w := a.o.Stdout
	var d testEventData
	if err := json.Unmarshal(raw, &d); err != nil {
		fmt.Fprintf(w, "Test %s sent.\n", kind)
		printFlat(w, raw)
		return
	}
	prog := strings.Trim(string(d.ProgramID), `"`)
	if kind == "chain" {
		fmt.Fprintf(w, "Synthetic chain ran for program %s (click → lead → sale):\n", prog)
		for _, s := range d.Chain {
			fmt.Fprintf(w, "  %s: %s%s\n", field(s, "step"), field(s, "status"), eventSuffix(s))
		}
		return
	}
	fmt.Fprintf(w, "Test %s sent to program %s", kind, prog)
	if id := strings.Trim(string(d.EventID), `"`); id != "" && id != "null" {
		fmt.Fprintf(w, " (event %s)", id)
	}
	fmt.Fprintln(w, ".")
	if d.Message != "" {
		fmt.Fprintf(w, "  %s\n", d.Message)
	}
}

// eventSuffix is " (event N)" when a chain step recorded an event.
func eventSuffix(step map[string]any) string {
	if v, ok := step["eventId"]; ok && v != nil {
		return " (event " + field(step, "eventId") + ")"
	}
	return ""
}

// printFlat writes a JSON value as sorted "path: value" lines, for answers
// whose shape the CLI does not need to know.
func printFlat(w io.Writer, raw json.RawMessage) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	var lines []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, c)
			}
		case []any:
			for i, c := range x {
				walk(fmt.Sprintf("%s[%d]", prefix, i), c)
			}
		case nil:
			lines = append(lines, prefix+": null")
		case float64:
			lines = append(lines, prefix+": "+field(map[string]any{"v": x}, "v"))
		default:
			lines = append(lines, fmt.Sprintf("%s: %v", prefix, x))
		}
	}
	walk("", v)
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
