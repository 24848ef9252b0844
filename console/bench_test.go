package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkOverview100kBindings renders the overview over a store with
// 100,000 bindings (two thirds active), a transcript and some deliveries.
// "cold" reads every binding from the store on each render (no cache);
// "cached" is the steady state of an operator refreshing the page.
// The bindings page (sort + page in memory) is measured beside it.
func BenchmarkOverview100kBindings(b *testing.B) {
	st := openStore(b)
	seed(b, st, 100_000, 200, 500)
	for _, bc := range []struct {
		name, path string
		ttl        int
	}{{"cold", "/", -1}, {"cached", "/", 0}, {"bindings-page-cold", "/bindings?page=1000", -1}, {"conversation", "/sessions/" + chatKey, 0}} {
		b.Run(bc.name, func(b *testing.B) {
			c := newTestConsole(b, st, "")
			if bc.ttl < 0 {
				c.o.BindingsTTL = -1
			} else {
				c.o.BindingsTTL = time.Hour
				c.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, bc.path, nil)) // warm the cache
			}
			for b.Loop() {
				rec := httptest.NewRecorder()
				c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, bc.path, nil))
				if rec.Code != 200 {
					b.Fatalf("%s = %d", bc.path, rec.Code)
				}
				_, _ = io.Copy(io.Discard, rec.Result().Body)
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/render")
		})
	}
}
