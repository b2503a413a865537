// Command gen writes the generated configuration reference,
// docs/configuration.md and docs/man/flexiq-scaled.toml.5, from the
// repository's root: `make docs`.
package main

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/flexiq/flexiq-scaled/internal/refdoc"
)

func main() {
	files, err := refdoc.Files(".")
	if err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
	for _, path := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(path, []byte(files[path]), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "gen: %v\n", err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
}
