package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestChartsLint runs charts/lint.sh, so `make test` (which runs this
// module's tests) lints and renders every chart with each ci values file,
// checks the renders with this command and proves its guards fire: the
// admin and internal routes never on the Ingress, the operations port on
// no Service behind it, a NetworkPolicy for every service, TRUSTED_PROXIES
// trusting nothing by default, no short token, the images named alike in
// the charts, the production example, the Makefile and skaffold.yaml, every
// chart in charts/README.md's table. lint.sh installs helm with
// `go install` when it is missing (about a minute, once).
func TestChartsLint(t *testing.T) {
	t.Parallel()
	script := filepath.Join("..", "..", "charts", "lint.sh")
	out, err := exec.Command("bash", script).CombinedOutput()
	if err != nil {
		t.Fatalf("charts/lint.sh: %v\n%s", err, out)
	}
	for _, want := range []string{
		"expect manifestcheck to refuse a public Service leading to the operations port",
		"expect manifestcheck to refuse a release without NetworkPolicies",
		"expect svc's default render to trust no proxy",
		// The images the charts pull are what `make images` builds.
		"compare the images of the production example and the default render with make image-refs",
		"expect the image check to refuse the production example with analytics.image.repository=analytics",
		"expect the image check to refuse images pushed under another registry",
		"expect the chart table check to refuse a table without analytics",
		"expect the Ingress table check to refuse a table without /dashboard",
		"all charts ok",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("charts/lint.sh did not say %q:\n%s", want, out)
		}
	}
}
