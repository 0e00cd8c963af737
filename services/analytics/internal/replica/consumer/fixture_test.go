package consumer_test

import (
	"testing"

	"github.com/svc-dev/svc/services/analytics/internal/replica/consumer"
)

// Only accounts' fixture address names a program; anything near it is a
// partner like any other.
func TestFixtureProgram(t *testing.T) {
	for email, want := range map[string]any{
		"test-partner+42@svc.invalid":                   int64(42),
		"test-partner+9007199254740993@svc.invalid":     int64(9007199254740993),
		"test-partner+0@svc.invalid":                    nil,
		"test-partner+42@svc.invalid.com":               nil,
		"test-partner+42@example.com":                   nil,
		"xtest-partner+42@svc.invalid":                  nil,
		"test-partner+4a@svc.invalid":                   nil,
		"test-partner@svc.invalid":                      nil,
		"test-partner+99999999999999999999@svc.invalid": nil,
		"": nil,
	} {
		if got := consumer.FixtureProgram(email); got != want {
			t.Errorf("FixtureProgram(%q) = %v, want %v", email, got, want)
		}
	}
}
