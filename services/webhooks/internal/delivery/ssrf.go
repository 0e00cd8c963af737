package delivery

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// The refusals of CheckURL, worded for the client (a 400's message).
var (
	ErrURLInvalid  = errors.New("url must be an absolute http(s) url with a host")
	ErrURLScheme   = errors.New("url must use https")
	ErrURLBlocked  = errors.New("url must not point to a private, loopback or link-local address")
	ErrURLNoLookup = errors.New("url host does not resolve")
)

// errBlockedDial is the dialer's refusal of a blocked address (connection
// time), told apart from other connection errors by the Sender.
var errBlockedDial = errors.New("destination address not allowed")

// lookupTimeout bounds CheckURL's name resolution.
const lookupTimeout = 5 * time.Second

// CheckURL says whether an endpoint's url may be used: https with a host,
// and, unless allowPrivate (the local stack and tests), a host that is not
// and does not resolve to an address Blocked refuses. The check at
// creation gives the brand a clear 400; the Sender's dialer checks the
// address again at each connection, since a name can resolve elsewhere
// later (DNS rebinding).
func CheckURL(raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Hostname() == "" || u.Opaque != "" {
		return ErrURLInvalid
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowPrivate {
			return ErrURLScheme
		}
	default:
		return ErrURLInvalid
	}
	if allowPrivate {
		return nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if Blocked(ip) {
			return ErrURLBlocked
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", strings.TrimSuffix(host, "."))
	if err != nil || len(addrs) == 0 {
		return ErrURLNoLookup
	}
	for _, a := range addrs {
		if Blocked(a) {
			return ErrURLBlocked
		}
	}
	return nil
}

// blockedPrefixes are the ranges besides those netip classifies itself.
var blockedPrefixes = [...]netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network": 0.x reaches the host itself on Linux
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and the broadcast address
	netip.MustParsePrefix("fec0::/10"),      // deprecated site-local
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("100::/64"),       // discard-only
}

// Blocked says whether a destination address is refused outside the local
// stack: loopback, private (RFC 1918, fc00::/7), link-local (169.254/16
// with the cloud metadata address, fe80::/10), unspecified, multicast,
// CGNAT and reserved ranges, and IPv4 addresses of those kinds carried in
// IPv6 (mapped, NAT64 64:ff9b::/96, 6to4 2002::/16).
func Blocked(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case netip.MustParsePrefix("64:ff9b::/96").Contains(ip):
			return Blocked(netip.AddrFrom4([4]byte(b[12:16])))
		case netip.MustParsePrefix("2002::/16").Contains(ip):
			return Blocked(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// dialControl refuses a connection to a blocked address: it runs after
// name resolution, on the address actually dialled.
func dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return errBlockedDial
	}
	if Blocked(ap.Addr()) {
		return errBlockedDial
	}
	return nil
}
