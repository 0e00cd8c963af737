package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"sync/atomic"
)

// Workload describes the clicks the generator sends: which links exist, how
// often a visitor comes back with a click id, and which client addresses the
// requests claim through X-Forwarded-For. It is shared by every worker; each
// worker draws from it through its own generator.
type Workload struct {
	Codes     []string // referral link codes that exist in the program
	ProgramID int64
	Origin    string   // the page origin, allowed by the program
	IPs       []string // forwarded client addresses, used round-robin
	// Reuse is the share of clicks that carry an existing_click_id the
	// worker got back earlier (a returning visitor).
	Reuse float64
	// WithProgram is the share of clicks that name program_id (the tracker
	// does when the page configures it).
	WithProgram float64

	corpus corpus

	nextIP atomic.Uint64
}

// newWorkload returns a workload over the given links and addresses with
// the default corpus of pages, browsers and locales.
func newWorkload(codes []string, programID int64, origin string, ips []string, reuse, withProgram float64) *Workload {
	return &Workload{
		Codes: codes, ProgramID: programID, Origin: origin, IPs: ips,
		Reuse: reuse, WithProgram: withProgram, corpus: defaultCorpus(),
	}
}

// nextAddr hands out the forwarded addresses round-robin so that no address
// is used more than ceil(requests/len(IPs)) times: with enough addresses the
// per-IP limit (60/min) never binds and the run measures the route, not the
// limiter.
func (w *Workload) nextAddr() string {
	return w.IPs[(w.nextIP.Add(1)-1)%uint64(len(w.IPs))]
}

// publicIPs returns n distinct public IPv4 addresses (see isPublic), so the
// service sees them as ordinary visitors, never as trusted proxies. The
// sequence is deterministic for a seed.
func publicIPs(n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	seen := make(map[uint32]struct{}, n)
	out := make([]string, 0, n)
	for len(out) < n {
		v := rng.Uint32()
		a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		if !isPublic(a) {
			continue
		}
		if _, dup := seen[v]; dup {
			continue
		}
		seen[v] = struct{}{}
		out = append(out, a.String())
	}
	return out
}

// isPublic reports whether a is an ordinary visitor address: not loopback,
// private, shared, link-local, documentation, benchmarking, multicast or
// reserved.
func isPublic(a netip.Addr) bool {
	if !a.Is4() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	b := a.As4()
	switch {
	case b[0] == 0, b[0] >= 224: // "this network", multicast, class E
		return false
	case b[0] == 100 && b[1]&0xc0 == 64: // shared address space 100.64.0.0/10
		return false
	case b[0] == 192 && b[1] == 0 && (b[2] == 0 || b[2] == 2): // IETF, TEST-NET-1
		return false
	case b[0] == 198 && (b[1] == 18 || b[1] == 19): // benchmarking 198.18.0.0/15
		return false
	case b[0] == 198 && b[1] == 51 && b[2] == 100, b[0] == 203 && b[1] == 0 && b[2] == 113: // TEST-NET-2, -3
		return false
	}
	return true
}

// corpus is the material realistic click bodies are drawn from.
type corpus struct {
	userAgents []string
	pages      [][2]string // path, title
	referrers  []string
	screens    [][2]string // screen, viewport
	locales    [][2]string // language, timezone
	utmSources []string
}

func defaultCorpus() corpus {
	return corpus{
		// Current browsers, weighted roughly like real traffic (desktop
		// Chrome and mobile Safari dominate).
		userAgents: []string{
			"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
			"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
			"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
			"Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
			"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.81 Mobile Safari/537.36",
			"Mozilla/5.0 (Linux; Android 14; SM-S921B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.6723.102 Mobile Safari/537.36",
			"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
			"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
			"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:132.0) Gecko/20100101 Firefox/132.0",
			"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
			"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
			"Mozilla/5.0 (iPad; CPU OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
		},
		pages: [][2]string{
			{"/", "Home"}, {"/pricing", "Pricing"}, {"/features", "Features"},
			{"/blog/how-we-scaled", "How we scaled"}, {"/signup", "Sign up"},
			{"/product/starter-kit", "Starter kit"}, {"/product/pro", "Pro plan"},
			{"/docs/getting-started", "Getting started"},
		},
		referrers: []string{"", "https://www.google.com/", "https://t.co/x1y2z3", "https://www.youtube.com/",
			"https://www.instagram.com/", "https://news.ycombinator.com/", "https://partner-blog.example/review"},
		screens: [][2]string{{"1920x1080", "1903x969"}, {"390x844", "390x664"}, {"1440x900", "1440x789"},
			{"412x915", "412x797"}, {"2560x1440", "2543x1289"}, {"1366x768", "1349x657"}},
		locales: [][2]string{{"en-US", "America/New_York"}, {"en-GB", "Europe/London"}, {"de-DE", "Europe/Berlin"},
			{"vi-VN", "Asia/Ho_Chi_Minh"}, {"fr-FR", "Europe/Paris"}, {"en-US", "America/Los_Angeles"}},
		utmSources: []string{"newsletter", "youtube", "twitter", "blog", "instagram"},
	}
}

// clickBody is the documented body of POST /api/v1/track/click, as the
// browser tracker sends it.
type clickBody struct {
	AffiliateURL     string `json:"affiliate_url"`
	PageURL          string `json:"page_url,omitempty"`
	PageTitle        string `json:"page_title,omitempty"`
	ReferrerURL      string `json:"referrer_url,omitempty"`
	SessionID        string `json:"session_id,omitempty"`
	UserAgent        string `json:"user_agent,omitempty"`
	ScreenResolution string `json:"screen_resolution,omitempty"`
	ViewportSize     string `json:"viewport_size,omitempty"`
	Language         string `json:"language,omitempty"`
	Timezone         string `json:"timezone,omitempty"`
	ExistingClickID  string `json:"existing_click_id,omitempty"`
	ProgramID        any    `json:"program_id,omitempty"` // integer or numeric string, both accepted
}

// click is one request to send.
type click struct {
	body      []byte
	userAgent string
	clientIP  string
	reused    bool
}

// generator makes one worker's clicks. It is not safe for concurrent use.
type generator struct {
	w      *Workload
	rng    *rand.Rand
	recent []string // click ids this worker got back, a ring
	pos    int
	buf    bytes.Buffer
	enc    *json.Encoder
}

const recentClickIDs = 512

func (w *Workload) generator(seed uint64) *generator {
	g := &generator{w: w, rng: rand.New(rand.NewPCG(seed, seed*31+7))}
	g.enc = json.NewEncoder(&g.buf)
	return g
}

// next builds the next click. The body slice is valid until the next call.
func (g *generator) next() (click, error) {
	r, cp := g.rng, &g.w.corpus
	code := g.w.Codes[r.IntN(len(g.w.Codes))]
	param := "via"
	if r.IntN(3) == 0 {
		param = "aff"
	}
	page := cp.pages[r.IntN(len(cp.pages))]
	scr := cp.screens[r.IntN(len(cp.screens))]
	loc := cp.locales[r.IntN(len(cp.locales))]
	ua := cp.userAgents[r.IntN(len(cp.userAgents))]
	b := clickBody{
		AffiliateURL:     g.w.Origin + page[0] + "?" + param + "=" + code + "&utm_source=" + cp.utmSources[r.IntN(len(cp.utmSources))] + "&utm_medium=referral",
		PageURL:          g.w.Origin + page[0],
		PageTitle:        page[1] + " | Bench Brand",
		ReferrerURL:      cp.referrers[r.IntN(len(cp.referrers))],
		SessionID:        "s_" + strconv.FormatUint(r.Uint64(), 36),
		UserAgent:        ua,
		ScreenResolution: scr[0],
		ViewportSize:     scr[1],
		Language:         loc[0],
		Timezone:         loc[1],
	}
	c := click{userAgent: ua, clientIP: g.w.nextAddr()}
	if len(g.recent) > 0 && r.Float64() < g.w.Reuse {
		b.ExistingClickID = g.recent[r.IntN(len(g.recent))]
		c.reused = true
	}
	if r.Float64() < g.w.WithProgram {
		if r.IntN(2) == 0 {
			b.ProgramID = g.w.ProgramID
		} else {
			b.ProgramID = strconv.FormatInt(g.w.ProgramID, 10)
		}
	}
	g.buf.Reset()
	if err := g.enc.Encode(&b); err != nil {
		return click{}, fmt.Errorf("encode click body: %w", err)
	}
	c.body = g.buf.Bytes()
	return c, nil
}

// observe remembers a click id the target returned, for later reuse.
func (g *generator) observe(clickID string) {
	if clickID == "" {
		return
	}
	if len(g.recent) < recentClickIDs {
		g.recent = append(g.recent, clickID)
		return
	}
	g.recent[g.pos] = clickID
	g.pos = (g.pos + 1) % recentClickIDs
}
