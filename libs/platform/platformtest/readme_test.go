package platformtest_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/svc-dev/svc/libs/platform/platformtest"
)

type nested struct {
	B string `env:"B_VAR"`
}

type config struct {
	A      int `env:"A_VAR"`
	Nested nested
	skip   bool
}

func TestEnvNamesAndTheREADMETable(t *testing.T) {
	t.Parallel()
	_ = config{}.skip
	if got := platformtest.EnvNames(&config{}); !slices.Equal(got, []string{"A_VAR", "B_VAR"}) {
		t.Fatalf("EnvNames = %v", got)
	}
	path := filepath.Join(t.TempDir(), "README.md")
	readme := "# svc\n\n## Configuration\n\n| Variable | Default |\n|---|---|\n| `B_VAR` | x |\n| `A_VAR` | 1 |\n\n## Next\n\n| `C_VAR` | not config |\n"
	if err := os.WriteFile(path, []byte(readme), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := platformtest.READMEConfigVars(t, path); !slices.Equal(got, []string{"B_VAR", "A_VAR"}) {
		t.Fatalf("READMEConfigVars = %v", got)
	}
	platformtest.WantREADMEConfigTable(t, path, config{})
}
