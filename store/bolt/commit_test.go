package bolt

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// TestCommitterIsolatesAFailingWrite: writes grouped in one transaction
// with one that fails (or panics) are still committed; only the failing
// callers get an error.
func TestCommitterIsolatesAFailingWrite(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "bot.db"), Options{MaxBatchDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	boom := errors.New("boom")
	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.commit.do(func(tx *bbolt.Tx) error {
				switch i {
				case 3:
					return boom
				case 7:
					panic("write 7")
				}
				return tx.Bucket(bucketMeta).Put(fmt.Appendf(nil, "k%d", i), []byte("v"))
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		switch i {
		case 3:
			if !errors.Is(err, boom) {
				t.Errorf("write 3: %v, want boom", err)
			}
		case 7:
			if err == nil || !strings.Contains(err.Error(), "panicked: write 7") {
				t.Errorf("write 7: %v, want its panic", err)
			}
		default:
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		}
	}
	if err := s.db.View(func(tx *bbolt.Tx) error {
		for i := range n {
			got := tx.Bucket(bucketMeta).Get(fmt.Appendf(nil, "k%d", i))
			if want := i != 3 && i != 7; (got != nil) != want {
				t.Errorf("key %d stored=%v, want %v", i, got != nil, want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
