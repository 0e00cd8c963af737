// Package api holds the OpenAPI 3.1 description of svc's public API
// (openapi.yaml, embedded), as YAML and as the JSON a service serves at
// GET /api/openapi.json. The validator that checks live requests and
// responses against it is package openapivalidate, kept apart so a service
// serving the document does not link the validation library.
package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// document is openapi.yaml as shipped. Embedded data, fixed at build time.
//
//go:embed openapi.yaml
var document []byte

// YAML returns the document as written (a copy: callers cannot change it).
func YAML() []byte { return bytes.Clone(document) }

// JSON returns the document converted to JSON, keys in the order the YAML
// writes them (GET /api/openapi.json serves this).
func JSON() ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(document, &root); err != nil {
		return nil, fmt.Errorf("parse openapi.yaml: %w", err)
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, &root); err != nil {
		return nil, fmt.Errorf("convert openapi.yaml to json: %w", err)
	}
	return buf.Bytes(), nil
}

// writeJSON writes a YAML node as JSON, keeping mapping order. Scalars are
// resolved by their YAML tag (so `200` stays a string key and `60` a
// number).
func writeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errors.New("expected exactly one YAML document")
		}
		return writeJSON(buf, n.Content[0])
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return fmt.Errorf("line %d: only scalar mapping keys are supported", k.Line)
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeValue(buf, k.Value); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeJSON(buf, v); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		return writeValue(buf, v)
	}
	return fmt.Errorf("line %d: unsupported YAML node kind %d", n.Line, n.Kind)
}

// writeValue encodes one JSON value without HTML escaping, so texts such
// as "Bearer <token>" stay readable.
func writeValue(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // the Encoder's newline
	return nil
}
