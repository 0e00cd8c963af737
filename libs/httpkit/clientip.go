package httpkit

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// IPResolver finds the client address of a request behind trusted proxies.
type IPResolver struct {
	trusted []netip.Prefix
}

// NewIPResolver parses a comma-separated list of CIDRs and bare IPs (the
// TRUSTED_PROXIES setting, e.g. "10.0.0.0/8,127.0.0.1,::1/128"). An empty list
// trusts no proxy: the peer address is the client. A malformed entry is an
// error, since a typo here silently changes who gets rate limited.
func NewIPResolver(trustedCIDRs string) (*IPResolver, error) {
	res := &IPResolver{}
	for part := range strings.SplitSeq(trustedCIDRs, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if strings.Contains(part, "/") {
			p, err := netip.ParsePrefix(part)
			if err != nil {
				return nil, fmt.Errorf("parse trusted proxy %q: %w", part, err)
			}
			p = p.Masked()
			if p.Addr().Is4In6() {
				p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
			}
			res.trusted = append(res.trusted, p)
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("parse trusted proxy %q: %w", part, err)
		}
		a = a.Unmap().WithZone("")
		res.trusted = append(res.trusted, netip.PrefixFrom(a, a.BitLen()))
	}
	return res, nil
}

// Trusted reports whether addr is one of the trusted proxies.
func (res *IPResolver) Trusted(addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	for _, p := range res.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// ClientIP returns the client address: the TCP peer, unless the peer is a
// trusted proxy; then X-Forwarded-For is walked from the right, skipping
// trusted hops, and the first untrusted address is the client (or the
// leftmost one when every hop is trusted). Walking from the right means a
// client cannot spoof its address by sending its own X-Forwarded-For: only
// entries appended by our proxies are believed. A malformed entry met on the
// walk ends it with the peer address; nothing here fails. The zero Addr is
// returned only when RemoteAddr itself is unparseable.
func (res *IPResolver) ClientIP(r *http.Request) netip.Addr {
	peer := parseHostAddr(r.RemoteAddr)
	if !peer.IsValid() || !res.Trusted(peer) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if hop == "" {
			continue
		}
		a := parseHostAddr(hop)
		if !a.IsValid() {
			return peer
		}
		client = a
		if !res.Trusted(a) {
			return a
		}
	}
	return client
}

// parseHostAddr accepts "ip", "ip:port", "[ipv6]:port" and "[ipv6]"; some
// proxies append ports to X-Forwarded-For entries. Zones are dropped and
// IPv4-mapped IPv6 addresses unmapped so one client has one key.
func parseHostAddr(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("")
	}
	return netip.Addr{}
}

type clientIPKey struct{}

// Middleware stores the resolved client address in the request context for
// ClientIPFrom, so it is computed once per request.
func (res *IPResolver) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), clientIPKey{}, res.ClientIP(r))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// ClientIPFrom returns the address stored by (*IPResolver).Middleware; the
// second result is false outside it.
func ClientIPFrom(ctx context.Context) (netip.Addr, bool) {
	a, ok := ctx.Value(clientIPKey{}).(netip.Addr)
	return a, ok
}
