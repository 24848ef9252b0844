// Package reporoot finds the repository's root directory from a test's working directory (its package
// directory), for test helpers that use programs installed under .cache (internal/npmtest,
// internal/dendritetest).
package reporoot

import (
	"os"
	"path/filepath"
)

// Dir walks up from the working directory to the directory holding go.mod.
func Dir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
