// Command gen-limits-doc writes docs/limits.md, generated from internal/limits, to
// standard output: `go run ./hack/gen-limits-doc > docs/limits.md` (make docs).
package main

import (
	"os"

	"github.com/workerd-operator/workerd-operator/internal/limits"
)

func main() {
	if _, err := os.Stdout.Write(limits.Markdown()); err != nil {
		os.Exit(1)
	}
}
