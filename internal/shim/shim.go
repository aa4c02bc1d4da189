package shim

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
)

// FS holds every *.js file of this directory, by base name (e.g. "health.js").
//
//go:embed *.js
var FS embed.FS

// Names of the shim modules this package's renderer users rely on.
const (
	HealthModule  = "health.js"
	TriggerModule = "trigger.js"
	TailModule    = "tail.js"
	IngressModule = "ingress.js"
)

// Source returns the bytes of the embedded shim file name (a base name such as
// "health.js"); the error names the file when it does not exist.
func Source(name string) ([]byte, error) {
	b, err := FS.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("shim: no embedded file %q: %w", name, err)
	}
	return b, nil
}

// MustSource is Source for names known at compile time; it panics when name is missing.
func MustSource(name string) []byte {
	b, err := Source(name)
	if err != nil {
		panic(err)
	}
	return b
}

// Names lists the embedded files, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(FS, ".")
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}
