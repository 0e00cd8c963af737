// Package figuresclient is accounts' client of analytics' GET
// /internal/v1/programs/{id}/partner-figures (services/analytics,
// internal/partnerfigures): the figures of one page of the console's
// partners list, asked on analytics' operations port with the internal
// token. It implements partners.FiguresSource; it never retries (the list
// answers without figures instead).
package figuresclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/services/accounts/internal/partners"
)

// Path is analytics' route, with the program id for %d.
const Path = "/internal/v1/programs/%d/partner-figures"

// DefaultTimeout bounds a call: the list waits this long at most for
// figures it can answer without.
const DefaultTimeout = 2 * time.Second

// maxBody bounds what is read of an answer (100 partners' figures are a
// few kilobytes).
const maxBody = 1 << 20

// Client calls one analytics base address.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

var _ partners.FiguresSource = (*Client)(nil)

// New returns a client of baseURL (analytics' operations address) that
// sends token; hc carries the transport (tracing) and timeout (nil: a
// DefaultTimeout client).
func New(baseURL, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(baseURL), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("analytics base URL %q: want http(s)://host[:port]", baseURL)
	}
	if token == "" {
		return nil, fmt.Errorf("analytics partner figures: INTERNAL_TOKEN is required")
	}
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	return &Client{base: u, token: token, http: hc}, nil
}

type answer struct {
	Data []struct {
		PartnerID   int64 `json:"partner_id"`
		Clicks      int64 `json:"clicks"`
		Leads       int64 `json:"leads"`
		Conversions int64 `json:"conversions"`
		Money       []struct {
			Currency   string `json:"currency"`
			Revenue    int64  `json:"revenue"`
			Commission int64  `json:"commission"`
		} `json:"money"`
	} `json:"data"`
	Window struct {
		From time.Time `json:"from"`
		To   time.Time `json:"to"`
	} `json:"window"`
}

// PartnerFigures asks for the figures of partners of programID.
func (c *Client) PartnerFigures(ctx context.Context, programID int64, ids []int64) (map[int64]partners.Figures, partners.Window, error) {
	u := *c.base
	u.Path += fmt.Sprintf(Path, programID)
	q := url.Values{}
	for _, id := range ids {
		q.Add("partner_id", strconv.FormatInt(id, 10))
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, partners.Window{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, partners.Window{}, fmt.Errorf("analytics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, partners.Window{}, fmt.Errorf("analytics: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, partners.Window{}, fmt.Errorf("analytics answered %d", resp.StatusCode)
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, partners.Window{}, fmt.Errorf("analytics: decode answer: %w", err)
	}
	out := make(map[int64]partners.Figures, len(a.Data))
	for _, d := range a.Data {
		f := partners.Figures{Clicks: d.Clicks, Leads: d.Leads, Conversions: d.Conversions, Money: make([]partners.Money, 0, len(d.Money))}
		for _, m := range d.Money {
			f.Money = append(f.Money, partners.Money{Currency: m.Currency, Revenue: m.Revenue, Commission: m.Commission})
		}
		out[d.PartnerID] = f
	}
	return out, partners.Window{From: a.Window.From, To: a.Window.To}, nil
}
