package obs

import (
	"log/slog"
	"net/url"
	"strings"
)

// Masked replaces a secret value in logs and config dumps.
const Masked = "***"

// secretKeyParts are substrings of attribute keys (lowercased, '-' read as
// '_') whose values are never logged. A plain "key" is deliberately absent:
// Kafka message keys and customer_key are identifiers, not secrets.
var secretKeyParts = [...]string{
	"token", "secret", "password", "passwd", "authorization", "cookie",
	"api_key", "apikey", "private_key", "signing_key", "credential",
}

// apiKeyPrefixes mark program API keys inside free text (error messages),
// so a key pasted into a log line by mistake is cut to its prefix.
var apiKeyPrefixes = [...]string{"svc_live_", "svc_test_"}

// Redact is a slog ReplaceAttr that masks secrets: the value of any attribute
// whose key looks secret, the password of URLs (DSNs) in any string or error
// value, "password=" pairs of keyword DSNs, Bearer credentials and program API
// keys. It is installed by NewLogger; exported for handlers built elsewhere.
func Redact(groups []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindGroup {
		return a
	}
	// The handler's own time and level hold nothing secret.
	if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
		return a
	}
	if IsSecretKey(a.Key) {
		// An empty value reveals nothing and tells a reader the secret is unset.
		if a.Value.Kind() == slog.KindString && a.Value.String() == "" {
			return a
		}
		return slog.String(a.Key, Masked)
	}
	switch a.Value.Kind() {
	case slog.KindString:
		s := a.Value.String()
		if r := RedactString(s); r != s {
			return slog.String(a.Key, r)
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok && err != nil {
			s := err.Error()
			if r := RedactString(s); r != s {
				return slog.String(a.Key, r)
			}
		}
	}
	return a
}

// IsSecretKey reports whether an attribute or config key names a secret.
func IsSecretKey(key string) bool {
	for _, p := range secretKeyParts {
		if containsKeyPart(key, p) {
			return true
		}
	}
	return false
}

// containsKeyPart is strings.Contains(normalised key, part) without
// allocating: ASCII case-insensitive, with '-' in key matching '_' in part.
// It runs for every attribute of every log line.
func containsKeyPart(key, part string) bool {
	n := len(part)
	for i := 0; i+n <= len(key); i++ {
		j := 0
		for ; j < n; j++ {
			c := key[i+j]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			} else if c == '-' {
				c = '_'
			}
			if c != part[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}

// RedactString masks secrets embedded in free text and returns s unchanged
// (same string, no allocation) when there is nothing to mask.
func RedactString(s string) string {
	if strings.Contains(s, "://") && strings.Contains(s, "@") {
		s = redactURLPasswords(s)
	}
	if strings.Contains(strings.ToLower(s), "password=") {
		s = redactKeywordPassword(s)
	}
	if strings.Contains(s, "Bearer ") {
		s = redactAfter(s, "Bearer ")
	}
	for _, p := range apiKeyPrefixes {
		if strings.Contains(s, p) {
			s = redactAfter(s, p)
		}
	}
	return s
}

// redactURLPasswords masks the password of every URL in s. URLs are found
// by their scheme separator and end at whitespace or a quote, which covers
// DSNs quoted in error messages.
func redactURLPasswords(s string) string {
	var b strings.Builder
	rest := s
	changed := false
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			break
		}
		start := i
		for start > 0 && isSchemeChar(rest[start-1]) {
			start--
		}
		end := i + 3
		for end < len(rest) && !isURLEnd(rest[end]) {
			end++
		}
		b.WriteString(rest[:start])
		raw := rest[start:end]
		if masked, ok := maskURLPassword(raw); ok {
			b.WriteString(masked)
			changed = true
		} else {
			b.WriteString(raw)
		}
		rest = rest[end:]
	}
	if !changed {
		return s
	}
	b.WriteString(rest)
	return b.String()
}

func maskURLPassword(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Masked)
			// url.String escapes the mask; keep it readable.
			return strings.Replace(u.String(), url.QueryEscape(Masked), Masked, 1), true
		}
		return raw, false
	}
	// Unparsable (e.g. a password with a bare '#' or '%'): cut between the
	// first ':' after the scheme and the last '@' of the authority.
	sep := strings.Index(raw, "://") + 3
	auth := raw[sep:]
	if slash := strings.IndexByte(auth, '/'); slash >= 0 {
		auth = auth[:slash]
	}
	at := strings.LastIndexByte(auth, '@')
	colon := strings.IndexByte(auth, ':')
	if at < 0 || colon < 0 || colon > at {
		return raw, false
	}
	return raw[:sep+colon+1] + Masked + raw[sep+at:], true
}

func isSchemeChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

func isURLEnd(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == '<' || c == '>'
}

// redactKeywordPassword masks the value in "password=..." pairs of keyword
// DSNs ("host=db user=app password=x").
func redactKeywordPassword(s string) string {
	lower := strings.ToLower(s)
	var b strings.Builder
	last := 0
	for i := 0; ; {
		j := strings.Index(lower[i:], "password=")
		if j < 0 {
			break
		}
		vs := i + j + len("password=")
		ve := vs
		if ve < len(s) && s[ve] == '\'' {
			ve++
			for ve < len(s) && s[ve] != '\'' {
				ve++
			}
			if ve < len(s) {
				ve++
			}
		} else {
			for ve < len(s) && s[ve] != ' ' && s[ve] != '&' && s[ve] != '\n' && s[ve] != '"' {
				ve++
			}
		}
		b.WriteString(s[last:vs])
		b.WriteString(Masked)
		last = ve
		i = ve
	}
	b.WriteString(s[last:])
	return b.String()
}

// redactAfter masks the token that follows every occurrence of prefix.
func redactAfter(s, prefix string) string {
	var b strings.Builder
	last := 0
	for i := 0; ; {
		j := strings.Index(s[i:], prefix)
		if j < 0 {
			break
		}
		vs := i + j + len(prefix)
		ve := vs
		for ve < len(s) && isTokenChar(s[ve]) {
			ve++
		}
		b.WriteString(s[last:vs])
		if ve > vs {
			b.WriteString(Masked)
		}
		last = ve
		i = ve
	}
	b.WriteString(s[last:])
	return b.String()
}

func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '~' || c == '+' || c == '/' || c == '='
}
