package proto

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeIsFresh regenerates every .pb.go into a temporary directory
// with gen.sh (which pins protoc-gen-go through go.mod) and fails when the
// committed files differ, so a .proto edit without `make proto` cannot land.
func TestGeneratedCodeIsFresh(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Fatalf("protoc not found in PATH, so the stale-generation check cannot run: install protobuf-compiler (apt-get install -y protobuf-compiler)")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "gen.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh failed: %v\n%s", err, b)
	}

	generated := pbFiles(t, out)
	committed := pbFiles(t, ".")
	for rel := range committed {
		if _, ok := generated[rel]; !ok {
			t.Errorf("%s is committed but no .proto generates it: delete it", rel)
		}
	}
	for rel, want := range generated {
		got, ok := committed[rel]
		switch {
		case !ok:
			t.Errorf("%s is missing: run make proto (or proto/gen.sh) and commit the result", rel)
		case !bytes.Equal(normalize(got), normalize(want)):
			t.Errorf("%s is stale: run make proto (or proto/gen.sh) and commit the result", rel)
		}
	}
}

// pbFiles reads every .pb.go under root, keyed by slash-separated relative path.
func pbFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".pb.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return files
}

// normalize drops the header line naming the protoc version: protoc-gen-go is
// pinned by go.mod, but protoc comes from the OS package and its version
// differs between machines without changing the generated code.
func normalize(b []byte) []byte {
	lines := bytes.Split(b, []byte("\n"))
	kept := lines[:0]
	for _, l := range lines {
		if bytes.HasPrefix(l, []byte("// \tprotoc ")) {
			continue
		}
		kept = append(kept, l)
	}
	return bytes.Join(kept, []byte("\n"))
}
