package platformtest

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// EnvNames lists the env tags of the fields of cfg (a struct or a pointer
// to one), nested structs included, in field order: the variables a
// service's LoadConfig reads.
func EnvNames(cfg any) []string {
	t := reflect.TypeOf(cfg)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return envNames(t)
}

func envNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if name := f.Tag.Get("env"); name != "" {
			names = append(names, name)
		} else if f.Type.Kind() == reflect.Struct {
			names = append(names, envNames(f.Type)...)
		}
	}
	return names
}

// READMEConfigVars lists the variables of the table in the "##
// Configuration" section of the README at path (rows starting
// "| `NAME` |"), in order.
func READMEConfigVars(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Configuration\n")
	if !ok {
		t.Fatalf("%s has no ## Configuration section", path)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\|")
	var vars []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		vars = append(vars, m[1])
	}
	return vars
}

// WantREADMEConfigTable fails unless the README at path documents exactly
// the variables cfg reads (EnvNames), each once: a variable added to the
// service's Config is documented, one removed is not left behind.
func WantREADMEConfigTable(t testing.TB, path string, cfg any) {
	t.Helper()
	inREADME := READMEConfigVars(t, path)
	if len(inREADME) == 0 {
		t.Fatalf("%s's Configuration table has no rows", path)
	}
	a, b := slices.Sorted(slices.Values(EnvNames(cfg))), slices.Sorted(slices.Values(inREADME))
	if !slices.Equal(a, b) {
		t.Errorf("%s's Configuration table and Config differ:\nConfig: %v\nREADME: %v", path, a, b)
	}
	if len(slices.Compact(b)) != len(inREADME) {
		t.Errorf("%s's Configuration table names a variable twice: %v", path, inREADME)
	}
}
