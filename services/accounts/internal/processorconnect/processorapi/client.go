// Package processorapi is the payment processor's OAuth and account API as
// the connection uses it (processorconnect.Processor), in the shapes the
// processor documents for Connect platforms: the authorize page
// (GET <connect>/oauth/authorize), the code exchange (POST
// <connect>/oauth/token, answering the connected account id as
// stripe_user_id) and the account retrieval (GET <api>/v1/accounts/{id}),
// both authenticated with the platform's secret key. make run points it at
// the stand-in processor of deploy/devstack/processorstub.
package processorapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/svc-dev/svc/services/accounts/internal/processorconnect"
)

// Config is the platform's credentials and the processor's addresses.
type Config struct {
	ClientID string
	// Secret is the platform's secret key: sent to the processor only,
	// never logged, never in an error.
	Secret string
	// ConnectURL serves /oauth/authorize and /oauth/token; APIURL serves
	// /v1/accounts/{id}. Without a trailing slash.
	ConnectURL, APIURL string
	// RedirectURL is the callback, as registered with the processor.
	RedirectURL string
	HTTP        *http.Client
}

// Client implements processorconnect.Processor.
type Client struct{ cfg Config }

var _ processorconnect.Processor = (*Client)(nil)

// New checks the configuration.
func New(cfg Config) (*Client, error) {
	if cfg.ClientID == "" || cfg.Secret == "" || cfg.ConnectURL == "" || cfg.APIURL == "" || cfg.RedirectURL == "" {
		return nil, errors.New("processorapi: client id, secret, connect, API and redirect URLs are required")
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{cfg: cfg}, nil
}

// AuthorizeURL is the processor's authorize page for state.
func (c *Client) AuthorizeURL(state string) string {
	q := url.Values{"response_type": {"code"}, "client_id": {c.cfg.ClientID}, "scope": {"read_write"},
		"redirect_uri": {c.cfg.RedirectURL}, "state": {state}}
	return c.cfg.ConnectURL + "/oauth/authorize?" + q.Encode()
}

// Exchange trades code for the connected account's id.
func (c *Client) Exchange(ctx context.Context, code string) (string, error) {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {c.cfg.ClientID}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.ConnectURL+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var out struct {
		AccountID string `json:"stripe_user_id"`
	}
	if err := c.do(req, &out); err != nil {
		return "", fmt.Errorf("exchange code: %w", err)
	}
	return out.AccountID, nil
}

// Account reads the connected account's flags.
func (c *Client) Account(ctx context.Context, id string) (processorconnect.Account, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.APIURL+"/v1/accounts/"+url.PathEscape(id), nil)
	if err != nil {
		return processorconnect.Account{}, err
	}
	var out struct {
		ID               string `json:"id"`
		ChargesEnabled   bool   `json:"charges_enabled"`
		PayoutsEnabled   bool   `json:"payouts_enabled"`
		DetailsSubmitted bool   `json:"details_submitted"`
	}
	if err := c.do(req, &out); err != nil {
		return processorconnect.Account{}, fmt.Errorf("retrieve account: %w", err)
	}
	return processorconnect.Account{ID: out.ID, ChargesEnabled: out.ChargesEnabled, PayoutsEnabled: out.PayoutsEnabled,
		DetailsSubmitted: out.DetailsSubmitted}, nil
}

// do sends req with the secret and decodes a 2xx JSON answer. Errors name
// the status only: the processor's body may echo what was sent.
func (c *Client) do(req *http.Request, out any) error {
	req.Header.Set("Authorization", "Bearer "+c.cfg.Secret)
	req.Header.Set("Accept", "application/json")
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return fmt.Errorf("processor unreachable: %w", ue.Err)
		}
		return errors.New("processor unreachable")
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("processor answered %d", resp.StatusCode)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return errors.New("processor answered malformed JSON")
	}
	return nil
}
