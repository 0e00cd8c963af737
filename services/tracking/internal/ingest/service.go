package ingest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/errkind"
)

// Service is the tracking use cases.
type Service interface {
	Click(ctx context.Context, in ClickInput) (ClickOutput, error)
	Lead(ctx context.Context, in LeadInput) (LeadOutput, error)
	Visit(ctx context.Context, in VisitInput) error
	Config(ctx context.Context, in ProgramRef) (Program, error)
	// OriginAllowedSomewhere answers browser preflights, which carry no
	// body and so name no program.
	OriginAllowedSomewhere(ctx context.Context, origin string) (bool, error)
	// Attribute decides whether a payment is attributed (the commissions
	// service's POST /internal/v1/attributions), once per transaction id.
	Attribute(ctx context.Context, in AttributionInput) (AttributionOutput, error)
}

// ProgramRef is a program id as a client sent it (string or integer).
type ProgramRef struct {
	Sent  bool
	Valid bool // a positive whole number
	ID    int64
}

// ClickInput is a decoded click request.
type ClickInput struct {
	AffiliateURL     string
	AffiliateURLSent bool
	Program          ProgramRef
	ExistingClickID  string
	VisitorIP        string
	UserAgent        string // body's user_agent, else the request header's
	Details          ClickDetails
	TestMode         bool
	TestProgramID    int64 // additional_data.program_id; 0 when absent
	Key              *Key  // a recognised program key, or nil
	ClientIP         netip.Addr
	Origin           string
}

// ClickOutput answers a click: Test is set in test mode.
type ClickOutput struct {
	ClickID          string
	PartnerCode      string
	CookieWindowDays int
	Test             *TestEvent
}

// TestEvent answers a test-mode click or lead.
type TestEvent struct {
	EventID   int64
	ProgramID int64
	Message   string
}

// LeadInput is a decoded lead request. Key is nil in browser mode.
type LeadInput struct {
	Key           *Key
	ClickID       string
	CustomerKey   string
	Email         string
	Program       ProgramRef // read in browser mode only
	TestMode      bool
	TestProgramID int64
	EventName     string
	Origin        string
}

// LeadOutput answers a lead.
type LeadOutput struct {
	Provisional bool
	Message     string
	Test        *TestEvent
}

// VisitInput is a decoded visit request.
type VisitInput struct {
	Program     ProgramRef
	PageURL     string
	ClickID     string
	ReferrerURL string
	SessionID   string
	ClientIP    netip.Addr
	Origin      string
}

// Config wires the service.
type Config struct {
	Store    Store
	Enricher Enricher
	Now      func() time.Time
}

type service struct {
	store    Store
	enricher Enricher
	now      func() time.Time
}

// NewService checks the wiring and returns the service.
func NewService(cfg Config) (Service, error) {
	if cfg.Store == nil || cfg.Enricher == nil || cfg.Now == nil {
		return nil, fmt.Errorf("ingest: store, enricher and clock are required")
	}
	return &service{store: cfg.Store, enricher: cfg.Enricher, now: cfg.Now}, nil
}

// adoptableClickID is an existing_click_id a new customer can be created
// with ("when no customer has the id, a new customer is created with it"):
// 1 to 128 of RFC 3986's unreserved characters, so an id set by another
// tool or an older tracker (a UUID, a nanoid, our cust_<n>_<n>) is kept,
// while one that a cookie, a URL or a log line would need to escape is
// not. Anything else is ignored (a new id), never a refusal: the spec
// refuses a click only for the rows of its table.
var adoptableClickID = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,128}$`)

// newClickID makes an id of the shape cust_<number>_<number>: the creation
// time in milliseconds and 53 random bits, unique without coordination.
func (s *service) newClickID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return clickIDPrefix + strconv.FormatInt(s.now().UnixMilli(), 10) + "_" +
		strconv.FormatUint(binary.BigEndian.Uint64(b[:])>>11, 10)
}

// referralCode extracts the aff (or via) value of a fully-qualified URL.
func referralCode(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fail(errkind.Invalid, MsgInvalidAffiliateURL)
	}
	q := u.Query()
	code := strings.TrimSpace(q.Get("aff"))
	if code == "" {
		code = strings.TrimSpace(q.Get("via"))
	}
	if code == "" {
		return "", fail(errkind.Invalid, MsgNoAffParameter)
	}
	// Percent-decoding can give what no link code holds and Postgres text
	// cannot: U+0000 ("aff=%00") or invalid UTF-8 ("via=A%80").
	if !utf8.ValidString(code) || strings.IndexByte(code, 0) >= 0 {
		return "", fail(errkind.Invalid, MsgLinkNotFound)
	}
	return code, nil
}

func (s *service) Click(ctx context.Context, in ClickInput) (ClickOutput, error) {
	in.TestMode = in.TestMode || in.Key.test()
	if !in.AffiliateURLSent || strings.TrimSpace(in.AffiliateURL) == "" {
		return ClickOutput{}, fail(errkind.Invalid, MsgAffiliateURLRequired)
	}
	code, err := referralCode(in.AffiliateURL)
	if err != nil {
		return ClickOutput{}, err
	}
	var scope int64
	if in.Program.Sent {
		if !in.Program.Valid {
			return ClickOutput{}, fail(errkind.Invalid, MsgUnknownProgram)
		}
		if _, ok, err := s.store.Program(ctx, in.Program.ID); err != nil {
			return ClickOutput{}, err
		} else if !ok {
			return ClickOutput{}, fail(errkind.Invalid, MsgUnknownProgram)
		}
		scope = in.Program.ID
	}
	if in.TestMode && in.Key != nil && in.TestProgramID != 0 && in.TestProgramID != in.Key.ProgramID {
		return ClickOutput{}, fail(errkind.Forbidden, MsgProgramKeyMismatch)
	}
	link, ok, err := s.store.FindLink(ctx, code, scope)
	if err != nil {
		return ClickOutput{}, err
	}
	if !ok {
		return ClickOutput{}, fail(errkind.Invalid, MsgLinkNotFound)
	}
	if link.PartnerID == 0 || !link.ProgramKnown {
		return ClickOutput{}, fail(errkind.Invalid, MsgInvalidLinkConfig)
	}
	if in.Origin != "" && !link.Program.AllowsOrigin(in.Origin) {
		return ClickOutput{}, fail(errkind.Forbidden, MsgOriginNotAllowed)
	}
	if !link.Active {
		return ClickOutput{}, &Error{Kind: ErrLinkDisabled, Message: MsgLinkDisabled, Hint: HintLinkDisabled}
	}
	ip := in.ClientIP
	// visitor_ip counts only with the link's own program key, not retired.
	if in.VisitorIP != "" && in.Key != nil && in.Key.Usable && in.Key.ProgramID == link.Program.ID {
		if v, err := netip.ParseAddr(strings.TrimSpace(in.VisitorIP)); err == nil {
			ip = v.Unmap()
		}
	}
	enr := s.enricher.Enrich(ip, in.UserAgent)
	in.Details.UserAgent, in.Details.AffiliateURL = in.UserAgent, in.AffiliateURL
	now := s.now().UTC()
	if in.TestMode {
		programID := link.Program.ID
		if in.Key != nil {
			programID = in.Key.ProgramID
		} else if in.TestProgramID != 0 {
			if _, ok, err := s.store.Program(ctx, in.TestProgramID); err != nil {
				return ClickOutput{}, err
			} else if !ok {
				return ClickOutput{}, fail(errkind.Invalid, MsgUnknownProgram)
			}
			programID = in.TestProgramID
		}
		viaKey := in.Key != nil && in.Key.Usable && in.Key.ProgramID == programID
		id, err := s.store.RecordTestClick(ctx, TestClickRecord{Link: link, ProgramID: programID, Details: in.Details, IP: ip, Enrichment: enr, At: now, ViaKey: viaKey})
		if err != nil {
			return ClickOutput{}, err
		}
		return ClickOutput{Test: &TestEvent{EventID: id, ProgramID: programID, Message: MsgTestClick}}, nil
	}
	existing := strings.TrimSpace(in.ExistingClickID)
	if !adoptableClickID.MatchString(existing) {
		existing = ""
	}
	res, err := s.store.RecordClick(ctx, ClickRecord{
		Link: link, ExistingClickID: existing, ProgramScoped: in.Program.Sent, NewClickID: s.newClickID,
		Details: in.Details, IP: ip, Enrichment: enr, At: now,
	})
	if err != nil {
		return ClickOutput{}, err
	}
	window := link.Program.AttributionWindowDays
	if window <= 0 {
		window = defaultAttributionWindow
	}
	return ClickOutput{ClickID: res.ClickID, PartnerCode: link.Code, CookieWindowDays: window}, nil
}

// hashEmail keeps only a SHA-256 of the normalised address.
func hashEmail(email string) string {
	e := strings.ToLower(strings.TrimSpace(email))
	if e == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(e))
	return hex.EncodeToString(sum[:])
}

func (s *service) Lead(ctx context.Context, in LeadInput) (LeadOutput, error) {
	// A test key's lead converts nobody: it would otherwise settle a real
	// customer and earn its partner the program's lead commission.
	if in.TestMode || in.Key.test() {
		return s.testLead(ctx, in)
	}
	server := in.Key != nil
	if in.ClickID == "" && in.CustomerKey == "" {
		return LeadOutput{}, fail(errkind.Invalid, MsgClickIDOrKeyRequired)
	}
	if !server && in.ClickID == "" {
		return LeadOutput{}, fail(errkind.Invalid, MsgClickIDRequiredNoKey)
	}
	ref := LeadRef{ClickID: in.ClickID}
	if server {
		ref.CustomerKey, ref.ProgramID = in.CustomerKey, in.Key.ProgramID
	}
	var out LeadOutput
	found, err := s.store.Lead(ctx, ref, s.now().UTC(), func(c Customer) (LeadDecision, error) {
		d := LeadDecision{Record: true, CustomerKey: in.CustomerKey, EmailHash: hashEmail(in.Email), EventName: in.EventName}
		if server {
			if c.ProgramID != in.Key.ProgramID {
				return d, fail(errkind.Invalid, MsgCustomerOtherProgram)
			}
			d.ViaKey, d.KeyID = true, in.Key.ID
		} else {
			if in.Program.Sent && (!in.Program.Valid || in.Program.ID != c.ProgramID) {
				return d, fail(errkind.Invalid, MsgCustomerNotFound)
			}
			if in.Origin != "" && !c.Program.AllowsOrigin(in.Origin) {
				return d, fail(errkind.Forbidden, MsgOriginNotAllowed)
			}
		}
		if c.Status != customerStatusClick {
			return d, fail(errkind.Invalid, fmt.Sprintf(msgStatusCannotBeLeadFmt, c.Status))
		}
		if server {
			if c.HasProvisional && c.SaleRecorded {
				return d, fail(errkind.Invalid, MsgLeadAfterSale)
			}
			out.Message = MsgLeadSettled
			return d, nil
		}
		if c.Program.LeadAuthPolicy == policyBrowserAllowed {
			out.Message = MsgLeadSettled
			return d, nil
		}
		// server_required: the browser's word is kept, not trusted.
		out.Provisional, out.Message = true, MsgLeadProvisional
		d.Provisional = true
		d.Record = !c.HasProvisional
		return d, nil
	})
	if err != nil {
		return LeadOutput{}, err
	}
	if !found {
		return LeadOutput{}, fail(errkind.Invalid, MsgCustomerNotFound)
	}
	return out, nil
}

func (s *service) testLead(ctx context.Context, in LeadInput) (LeadOutput, error) {
	if in.Key != nil && in.TestProgramID != 0 && in.TestProgramID != in.Key.ProgramID {
		return LeadOutput{}, fail(errkind.Forbidden, MsgProgramKeyMismatch)
	}
	rec := TestLeadRecord{ClickID: in.ClickID, CustomerKey: in.CustomerKey, EmailHash: hashEmail(in.Email), EventName: in.EventName, At: s.now().UTC()}
	var customer Customer
	var haveCustomer bool
	if in.ClickID != "" {
		c, ok, err := s.store.FindCustomer(ctx, LeadRef{ClickID: in.ClickID})
		if err != nil {
			return LeadOutput{}, err
		}
		customer, haveCustomer = c, ok
	}
	switch {
	case in.Key != nil:
		rec.ProgramID, rec.ViaKey, rec.KeyID = in.Key.ProgramID, true, in.Key.ID
	case in.TestProgramID != 0:
		rec.ProgramID = in.TestProgramID
	case in.Program.Sent && in.Program.Valid:
		rec.ProgramID = in.Program.ID
	case haveCustomer:
		rec.ProgramID = customer.ProgramID
	default:
		return LeadOutput{}, fail(errkind.Invalid, MsgTestProgramRequired)
	}
	if in.Key == nil {
		p, ok, err := s.store.Program(ctx, rec.ProgramID)
		if err != nil {
			return LeadOutput{}, err
		}
		if !ok {
			return LeadOutput{}, fail(errkind.Invalid, MsgUnknownProgram)
		}
		if in.Origin != "" && !p.AllowsOrigin(in.Origin) {
			return LeadOutput{}, fail(errkind.Forbidden, MsgOriginNotAllowed)
		}
	}
	if haveCustomer && customer.ProgramID == rec.ProgramID {
		rec.CustomerID = customer.ID
	}
	id, err := s.store.RecordTestLead(ctx, rec)
	if err != nil {
		return LeadOutput{}, err
	}
	return LeadOutput{Message: MsgTestLead, Test: &TestEvent{EventID: id, ProgramID: rec.ProgramID, Message: MsgTestLead}}, nil
}

func (s *service) program(ctx context.Context, ref ProgramRef) (Program, error) {
	if !ref.Sent {
		return Program{}, fail(errkind.Invalid, MsgProgramIDRequired)
	}
	if !ref.Valid {
		return Program{}, fail(errkind.Invalid, MsgUnknownProgram)
	}
	p, ok, err := s.store.Program(ctx, ref.ID)
	if err != nil {
		return Program{}, err
	}
	if !ok {
		return Program{}, fail(errkind.Invalid, MsgUnknownProgram)
	}
	if p.AttributionWindowDays <= 0 {
		p.AttributionWindowDays = defaultAttributionWindow
	}
	return p, nil
}

func (s *service) Visit(ctx context.Context, in VisitInput) error {
	p, err := s.program(ctx, in.Program)
	if err != nil {
		return err
	}
	u, perr := url.Parse(strings.TrimSpace(in.PageURL))
	if in.PageURL == "" || perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(in.PageURL) > maxStoredTextLength {
		return fail(errkind.Invalid, MsgPageURLRequired)
	}
	if in.Origin != "" && !p.AllowsOrigin(in.Origin) {
		return fail(errkind.Forbidden, MsgOriginNotAllowed)
	}
	_, err = s.store.RecordVisit(ctx, Visit{
		ProgramID: p.ID, ClickID: in.ClickID, PageURL: in.PageURL, ReferrerURL: in.ReferrerURL,
		SessionID: in.SessionID, IP: in.ClientIP, At: s.now().UTC(),
	})
	return err
}

func (s *service) Config(ctx context.Context, ref ProgramRef) (Program, error) {
	return s.program(ctx, ref)
}

// maxOriginLength bounds what is looked up: a scheme, a host name of at
// most 253 characters and a port.
const maxOriginLength = len("https://") + 253 + len(":65535")

func (s *service) OriginAllowedSomewhere(ctx context.Context, origin string) (bool, error) {
	// Allowed origins are stored as lower-case http(s)://host[:port]
	// (accounts' settings check), so nothing else can match: answer without
	// a query, which Postgres would refuse anyway for invalid UTF-8 or NUL
	// (an error per request, logged, under a flood of such headers).
	if !strings.HasPrefix(origin, "http://") && !strings.HasPrefix(origin, "https://") ||
		len(origin) > maxOriginLength || !utf8.ValidString(origin) || strings.IndexByte(origin, 0) >= 0 {
		return false, nil
	}
	return s.store.AnyProgramAllowsOrigin(ctx, origin)
}
