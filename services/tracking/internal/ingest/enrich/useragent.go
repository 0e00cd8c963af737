package enrich

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mileusna/useragent"
)

// uaInfo is the cached result of parsing one User-Agent.
type uaInfo struct {
	device, os, browser string
}

func (e *Enricher) parseUA(userAgent string) uaInfo {
	userAgent = strings.TrimSpace(userAgent)
	if userAgent == "" {
		return uaInfo{}
	}
	if len(userAgent) > maxUALen {
		userAgent = userAgent[:maxUALen]
	}
	if e.uaCache == nil {
		return parseUA(userAgent)
	}
	if v, ok := e.uaCache.Get(userAgent); ok {
		return v
	}
	v := parseUA(userAgent)
	// Clone so the cache never pins a larger buffer the string was sliced
	// from (a request body, or the untruncated header).
	e.uaCache.Add(strings.Clone(userAgent), v)
	return v
}

// browserAlias renames the few family names the parser reports that are
// not the names people know the browser by.
func browserAlias(name string) string {
	switch name {
	case "Trident", useragent.Msie:
		return useragent.InternetExplorer
	}
	return name
}

func parseUA(userAgent string) uaInfo {
	ua := useragent.Parse(userAgent)
	return uaInfo{
		device:  deviceType(ua, userAgent),
		os:      sanitize(ua.OS),
		browser: sanitize(browserAlias(ua.Name)),
	}
}

// deviceType maps the parser's flags to the stored device type. Bot wins over
// the form factor: Googlebot's smartphone crawler is a bot, not a phone.
func deviceType(ua useragent.UserAgent, raw string) string {
	switch {
	case ua.Bot:
		return DeviceBot
	case ua.Tablet:
		return DeviceTablet
	case ua.OS == useragent.Android && !strings.Contains(raw, "Mobile"):
		// The parser marks every Android UA as mobile unless it says
		// "tablet". Android browsers (Chrome, Samsung Internet, WebView)
		// send the "Mobile" token only on phones; Google documents its
		// absence as the way to recognise a tablet.
		return DeviceTablet
	case ua.Mobile:
		return DeviceMobile
	case ua.Desktop:
		return DeviceDesktop
	}
	return ""
}

// sanitize keeps a parsed name storable and bounded: the parser can echo
// parts of an unrecognised UA, which is client input and may hold invalid
// UTF-8 or control bytes (Postgres text rejects NUL). A name too long to be a
// family name is treated as unknown.
func sanitize(s string) string {
	if len(s) > maxBrowserLen {
		return ""
	}
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	s = strings.ToValidUTF8(s, "")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, s)
}
