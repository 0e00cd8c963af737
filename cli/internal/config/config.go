// Package config keeps the svc command-line client's files in the user's
// config directory: config.json (base URL, default program key) and
// credentials.json (the login token). Both hold secrets, so the directory is
// 0700 and the files 0600, written atomically (temp file + rename) so a
// crash never leaves half a file.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

const (
	// ConfigFile holds Settings.
	ConfigFile = "config.json"
	// CredentialsFile holds Credentials.
	CredentialsFile = "credentials.json"

	dirMode  fs.FileMode = 0o700
	fileMode fs.FileMode = 0o600
)

// Settings is config.json.
type Settings struct {
	BaseURL string `json:"base_url,omitempty"`
	APIKey  string `json:"api_key,omitempty"`
}

// Credentials is credentials.json: the login token of `svc login`.
type Credentials struct {
	// BaseURL is the server that issued the token; it is only valid there.
	BaseURL   string          `json:"base_url"`
	Token     string          `json:"token"`
	ExpiresAt time.Time       `json:"expires_at,omitzero"`
	User      json.RawMessage `json:"user,omitempty"`
}

// Store reads and writes the files of one directory.
type Store struct {
	Dir string
}

// Path returns the path of a file of the store.
func (s Store) Path(name string) string { return filepath.Join(s.Dir, name) }

// LoadSettings reads config.json; a missing file is empty settings.
func (s Store) LoadSettings() (Settings, error) {
	var v Settings
	_, err := s.load(ConfigFile, &v)
	return v, err
}

// SaveSettings writes config.json.
func (s Store) SaveSettings(v Settings) error { return s.save(ConfigFile, v) }

// LoadCredentials reads credentials.json; nil when there is none.
func (s Store) LoadCredentials() (*Credentials, error) {
	var c Credentials
	ok, err := s.load(CredentialsFile, &c)
	if err != nil || !ok {
		return nil, err
	}
	return &c, nil
}

// SaveCredentials writes credentials.json.
func (s Store) SaveCredentials(c Credentials) error { return s.save(CredentialsFile, c) }

// DeleteCredentials removes credentials.json and reports whether it existed.
func (s Store) DeleteCredentials() (bool, error) {
	err := os.Remove(s.Path(CredentialsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete credentials: %w", err)
	}
	return true, nil
}

func (s Store) load(name string, v any) (bool, error) {
	b, err := os.ReadFile(s.Path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", s.Path(name), err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("parse %s: %w (fix or delete the file)", s.Path(name), err)
	}
	return true, nil
}

func (s Store) save(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	b = append(b, '\n')
	if err := os.MkdirAll(s.Dir, dirMode); err != nil {
		return fmt.Errorf("create config directory: %w", err)
	}
	// MkdirAll keeps the mode of a directory that already exists: tighten
	// it, since the files inside hold secrets.
	if err := os.Chmod(s.Dir, dirMode); err != nil {
		return fmt.Errorf("secure config directory: %w", err)
	}
	tmp, err := os.CreateTemp(s.Dir, "."+name+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(fileMode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), s.Path(name)); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
