package matrix

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// lagProxy fronts the real Dendrite and answers 404 for the first hide GETs of one event, as Dendrite itself does
// for an event its sync API has not taken yet (seen in the full suite under load).
type lagProxy struct {
	mu    sync.Mutex
	event string
	hide  int
	hits  int
}

func (p *lagProxy) start(t *testing.T, upstream string) string {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		lag := p.event != "" && r.Method == http.MethodGet && strings.HasSuffix(r.URL.EscapedPath(), "/event/"+url.PathEscape(p.event)) && p.hits < p.hide
		if lag {
			p.hits++
		}
		p.mu.Unlock()
		if lag {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"errcode":"M_NOT_FOUND","error":"The event was not found or you do not have permission to read this event"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A thread posted into right after its root was created: the homeserver may not serve the root yet (404). That
// is not a gone destination; a root still unknown after the grace period is.
func TestThreadRootNotYetVisibleIsNotGone(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	p := &lagProxy{hide: 3}
	c := e.client(t, func(cfg *Options) { cfg.HomeserverURL = p.start(t, e.srv.URL) })
	root, err := c.CreateThread(ctx, e.room, "Task", "root-lag", Persona{})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.event = root
	p.mu.Unlock()
	rc, err := c.Send(ctx, Message{DeliveryID: "lag1", RoomID: e.room, ThreadRoot: root, Text: "right away"})
	if err != nil {
		t.Fatalf("send into a just-created thread: %v", err)
	}
	p.mu.Lock()
	hits := p.hits
	p.mu.Unlock()
	if hits != 3 || len(rc.EventIDs) != 1 {
		t.Fatalf("root answered 404 %d times, %d parts posted", hits, len(rc.EventIDs))
	}
	start := time.Now()
	_, err = c.Send(ctx, Message{DeliveryID: "lag2", RoomID: e.room, ThreadRoot: "$nosuchevent", Text: "x"})
	if !errors.Is(err, ErrDestinationGone) {
		t.Fatalf("send into an unknown root: %v, want ErrDestinationGone", err)
	}
	if d := time.Since(start); d > rootGrace+2*time.Second {
		t.Fatalf("unknown root took %s to fail, grace is %s", d, rootGrace)
	}
}
