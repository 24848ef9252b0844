package postgres

import (
	"encoding/json"
	"fmt"
	"time"
)

// encode marshals a record for a bytea data column.
func encode(what, id string, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("postgres: encode %s %q: %w", what, id, err)
	}
	return raw, nil
}

// decode unmarshals a data column into a fresh T.
func decode[T any](what, id string, raw []byte) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("postgres: decode %s %q: %w", what, id, err)
	}
	return v, nil
}

// timeKey splits t into an orderable (seconds, nanoseconds) pair; the zero
// time orders before every real one (same order as store/bolt's timeKey).
func timeKey(t time.Time) (sec int64, nsec int32) {
	return t.Unix(), int32(t.Nanosecond())
}
