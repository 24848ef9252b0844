package binding

import (
	"cmp"
	"slices"
)

// sortRecords orders records by bind time, then id, so listings are stable.
func sortRecords(rs []Record) {
	slices.SortFunc(rs, func(a, b Record) int {
		if c := a.BoundAt.Compare(b.BoundAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
