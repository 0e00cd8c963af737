package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestMissingFilesAreEmpty(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "svc")}
	set, err := s.LoadSettings()
	if err != nil || set != (Settings{}) {
		t.Fatalf("%+v %v", set, err)
	}
	c, err := s.LoadCredentials()
	if err != nil || c != nil {
		t.Fatalf("%+v %v", c, err)
	}
	existed, err := s.DeleteCredentials()
	if err != nil || existed {
		t.Fatalf("%v %v", existed, err)
	}
}

func TestRoundTripAndModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("POSIX modes")
	}
	s := Store{Dir: filepath.Join(t.TempDir(), "nested", "svc")}
	exp := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	cred := Credentials{BaseURL: "http://h", Token: "svc_cli_secret", ExpiresAt: exp, User: json.RawMessage(`{"email":"a@b"}`)}
	if err := s.SaveCredentials(cred); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSettings(Settings{BaseURL: "http://h", APIKey: "svc_live_k"}); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, s.Dir); m != 0o700 {
		t.Errorf("dir mode %o", m)
	}
	for _, f := range []string{CredentialsFile, ConfigFile} {
		if m := mode(t, s.Path(f)); m != 0o600 {
			t.Errorf("%s mode %o", f, m)
		}
	}
	got, err := s.LoadCredentials()
	var user bytes.Buffer
	if err == nil {
		err = json.Compact(&user, got.User)
	}
	if err != nil || got.Token != cred.Token || !got.ExpiresAt.Equal(exp) || got.BaseURL != "http://h" || user.String() != `{"email":"a@b"}` {
		t.Fatalf("%+v %v", got, err)
	}
	set, err := s.LoadSettings()
	if err != nil || set.APIKey != "svc_live_k" || set.BaseURL != "http://h" {
		t.Fatalf("%+v %v", set, err)
	}
	// No temp files are left behind.
	entries, _ := os.ReadDir(s.Dir)
	if len(entries) != 2 {
		t.Fatalf("entries %v", entries)
	}
	existed, err := s.DeleteCredentials()
	if err != nil || !existed {
		t.Fatalf("%v %v", existed, err)
	}
	if _, err := os.Stat(s.Path(CredentialsFile)); !os.IsNotExist(err) {
		t.Fatalf("still there: %v", err)
	}
}

func TestLooseModesAreTightened(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("POSIX modes")
	}
	dir := filepath.Join(t.TempDir(), "svc")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := Store{Dir: dir}
	if err := os.WriteFile(s.Path(CredentialsFile), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCredentials(Credentials{Token: "t"}); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("dir mode %o", m)
	}
	if m := mode(t, s.Path(CredentialsFile)); m != 0o600 {
		t.Errorf("file mode %o", m)
	}
}

func TestCorruptFileNamesIt(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if err := os.WriteFile(s.Path(ConfigFile), []byte(`{`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.LoadSettings()
	if err == nil || !strings.Contains(err.Error(), s.Path(ConfigFile)) {
		t.Fatalf("%v", err)
	}
}

func TestOmitsEmptyFields(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if err := s.SaveSettings(Settings{BaseURL: "http://h"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(s.Path(ConfigFile))
	if strings.Contains(string(b), "api_key") {
		t.Fatalf("%s", b)
	}
}
