package failure

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// vectorFile is the table shared with internal/shim/failure.js.
var vectorFile = filepath.Join("testdata", "vectors.json")

type vectorWant struct {
	Class     Class `json:"class,omitempty"`
	Retryable *bool `json:"retryable,omitempty"`
	Cause     Cause `json:"cause"`
}

type vector struct {
	Name        string       `json:"name"`
	Kind        string       `json:"kind"`
	Source      string       `json:"source"`
	Error       *JSError     `json:"error,omitempty"`
	Termination *Termination `json:"termination,omitempty"`
	Want        vectorWant   `json:"want"`
}

// result is what one vector yields; the JS harness returns the same shape.
type result struct {
	Name      string `json:"name"`
	Class     Class  `json:"class,omitempty"`
	Retryable *bool  `json:"retryable,omitempty"`
	Cause     Cause  `json:"cause"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", vectorFile, err)
	}
	const minVectors = 40 // issue 9, "Done means" 1
	if len(doc.Vectors) < minVectors {
		t.Fatalf("%s holds %d vectors, issue 9 asks for at least %d", vectorFile, len(doc.Vectors), minVectors)
	}
	seen := map[string]bool{}
	for i, v := range doc.Vectors {
		switch {
		case v.Name == "" || seen[v.Name]:
			t.Fatalf("vector %d: name %q empty or repeated", i, v.Name)
		case v.Source == "":
			t.Fatalf("vector %q: no source", v.Name)
		case v.Kind == "call" && v.Error == nil, v.Kind == "termination" && v.Termination == nil, v.Kind != "call" && v.Kind != "termination":
			t.Fatalf("vector %q: kind %q without its input", v.Name, v.Kind)
		}
		seen[v.Name] = true
	}
	return doc.Vectors
}

// goResult runs one vector through the Go classifier.
func goResult(v vector) result {
	if v.Kind == "call" {
		c := ClassifyCall(v.Error)
		r := IsRetryable(c)
		return result{Name: v.Name, Class: c, Retryable: &r, Cause: ClassifyError(v.Error)}
	}
	return result{Name: v.Name, Cause: ClassifyTermination(*v.Termination)}
}

func wantResult(v vector) result {
	return result{Name: v.Name, Class: v.Want.Class, Retryable: v.Want.Retryable, Cause: v.Want.Cause}
}

func equalResult(a, b result) bool {
	if a.Name != b.Name || a.Class != b.Class || a.Cause != b.Cause || (a.Retryable == nil) != (b.Retryable == nil) {
		return false
	}
	return a.Retryable == nil || *a.Retryable == *b.Retryable
}

func fmtResult(r result) string {
	b, _ := json.Marshal(r)
	return string(b)
}

func TestVectorsGo(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			if got, want := goResult(v), wantResult(v); !equalResult(got, want) {
				t.Errorf("source %s:\n got %s\nwant %s", v.Source, fmtResult(got), fmtResult(want))
			}
		})
	}
}

func TestVectorsCoverTaxonomy(t *testing.T) {
	classes, causes := map[Class]bool{}, map[Cause]bool{}
	for _, v := range loadVectors(t) {
		classes[v.Want.Class] = true
		causes[v.Want.Cause] = true
	}
	for _, c := range Classes {
		if !classes[c] {
			t.Errorf("no vector expects class %s", c)
		}
	}
	for _, c := range Causes {
		if !causes[c] {
			t.Errorf("no vector expects cause %s", c)
		}
	}
}
