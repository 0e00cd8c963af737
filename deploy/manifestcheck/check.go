package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// schemas maps apiVersion/Kind to a constructor of the typed object it is
// strictly decoded into. A kind listed under another apiVersion is reported
// as an unsupported version (e.g. policy/v1beta1 PodDisruptionBudget).
var schemas = map[string]func() any{
	"v1/Service":                             func() any { return &corev1.Service{} },
	"v1/Secret":                              func() any { return &corev1.Secret{} },
	"v1/ConfigMap":                           func() any { return &corev1.ConfigMap{} },
	"v1/ServiceAccount":                      func() any { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":                     func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                    func() any { return &appsv1.StatefulSet{} },
	"batch/v1/Job":                           func() any { return &batchv1.Job{} },
	"networking.k8s.io/v1/Ingress":           func() any { return &networkingv1.Ingress{} },
	"networking.k8s.io/v1/NetworkPolicy":     func() any { return &networkingv1.NetworkPolicy{} },
	"policy/v1/PodDisruptionBudget":          func() any { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2/HorizontalPodAutoscaler": func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
}

// defaultUnchecked are custom resources the charts may render; their types
// are not in k8s.io/api, so they are accepted after a basic shape check.
var defaultUnchecked = []string{
	"monitoring.coreos.com/v1/ServiceMonitor",
	"monitoring.coreos.com/v1/PodMonitor",
	"monitoring.coreos.com/v1/PrometheusRule",
}

// Options tune Check.
type Options struct {
	// Unchecked lists apiVersion/Kind values accepted without a schema.
	Unchecked []string
}

// Problem is one failed check.
type Problem struct {
	Doc int    // 1-based position of the document in the input; 0 for input-wide problems
	Ref string // Kind/name of the object, when known
	Msg string
}

func (p Problem) String() string {
	switch {
	case p.Doc == 0:
		return p.Msg
	case p.Ref == "":
		return fmt.Sprintf("document %d: %s", p.Doc, p.Msg)
	default:
		return fmt.Sprintf("document %d (%s): %s", p.Doc, p.Ref, p.Msg)
	}
}

// Result is what Check found.
type Result struct {
	Objects  int
	Counts   map[string]int // objects per Kind
	Problems []Problem
}

// object is one decoded document.
type object struct {
	doc        int
	apiVersion string
	kind       string
	name       string
	typed      any  // nil for unchecked kinds and when decoding failed
	broken     bool // a schema exists but the document did not decode
}

func (o object) ref() string { return o.kind + "/" + o.name }

// Check reads every document of r and runs all checks. The error is only for
// input that cannot be read or split into documents; everything else is a
// Problem.
func Check(r io.Reader, opts Options) (Result, error) {
	res := Result{Counts: map[string]int{}}
	unchecked := map[string]bool{}
	for _, gvk := range opts.Unchecked {
		unchecked[gvk] = true
	}
	kindVersions := map[string][]string{}
	for gvk := range schemas {
		i := strings.LastIndex(gvk, "/")
		kindVersions[gvk[i+1:]] = append(kindVersions[gvk[i+1:]], gvk[:i])
	}

	var objects []object
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("read document %d: %w", doc, err)
		}
		obj, problems := decode(doc, raw, unchecked, kindVersions)
		res.Problems = append(res.Problems, problems...)
		if obj == nil {
			continue
		}
		res.Objects++
		res.Counts[obj.kind]++
		objects = append(objects, *obj)
	}
	res.Problems = append(res.Problems, crossCheck(objects)...)
	return res, nil
}

// decode turns one document into an object; nil with no problem means an
// empty document (only comments or whitespace).
func decode(doc int, raw []byte, unchecked map[string]bool, kindVersions map[string][]string) (*object, []Problem) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	// YAMLToJSONStrict refuses duplicate keys, which plain YAML parsing
	// silently resolves to the last one.
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, []Problem{{Doc: doc, Msg: fmt.Sprintf("invalid YAML: %v", err)}}
	}
	if t := bytes.TrimSpace(js); bytes.Equal(t, []byte("null")) || len(t) == 0 {
		return nil, nil
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, []Problem{{Doc: doc, Msg: fmt.Sprintf("not a Kubernetes object: %v", err)}}
	}
	obj := &object{doc: doc, apiVersion: head.APIVersion, kind: head.Kind, name: head.Metadata.Name}
	if head.APIVersion == "" || head.Kind == "" {
		return obj, []Problem{{Doc: doc, Ref: obj.ref(), Msg: "apiVersion and kind are required"}}
	}
	var problems []Problem
	if head.Metadata.Name == "" {
		problems = append(problems, Problem{Doc: doc, Ref: obj.ref(), Msg: "metadata.name is required"})
	}

	gvk := head.APIVersion + "/" + head.Kind
	newTyped, ok := schemas[gvk]
	switch {
	case ok:
	case unchecked[gvk]:
		return obj, problems
	case len(kindVersions[head.Kind]) > 0:
		return obj, append(problems, Problem{Doc: doc, Ref: obj.ref(), Msg: fmt.Sprintf(
			"apiVersion %s is not supported for %s (use %s)", head.APIVersion, head.Kind, strings.Join(kindVersions[head.Kind], " or "))})
	default:
		return obj, append(problems, Problem{Doc: doc, Ref: obj.ref(), Msg: fmt.Sprintf(
			"unknown kind %s: not in k8s.io/api and not allowed with -allow", gvk)})
	}

	typed := newTyped()
	// UnmarshalStrict is what the API server's strict field validation uses:
	// unlike encoding/json it matches field names case-sensitively, so
	// "ContainerPort" is reported instead of silently accepted.
	strict, err := sigsjson.UnmarshalStrict(js, typed, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		obj.broken = true
		return obj, append(problems, Problem{Doc: doc, Ref: obj.ref(), Msg: fmt.Sprintf("does not decode into %s: %v", gvk, err)})
	}
	for _, e := range strict {
		problems = append(problems, Problem{Doc: doc, Ref: obj.ref(), Msg: e.Error()})
	}
	obj.typed = typed
	return obj, problems
}
