package procs

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// memStore is a hand-written procs.Store for the registry's tests.
type memStore struct {
	mu sync.Mutex
	m  map[string]Record
}

func (s *memStore) RecordProcess(_ context.Context, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[r.Key()] = r
	return nil
}
func (s *memStore) RemoveProcess(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}
func (s *memStore) Processes(context.Context) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, r := range s.m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

// fakeOS: this bot is pid 1000 (start 50) on host h, boot b.
type fakeOS struct {
	alive  map[int]uint64 // pid -> start time
	groups map[int]bool   // pgid -> has members
	killed []string
}

func (o *fakeOS) Host() string        { return "h" }
func (o *fakeOS) BootID() string      { return "b" }
func (o *fakeOS) Self() (int, uint64) { return 1000, 50 }
func (o *fakeOS) StartTime(pid int) (uint64, bool) {
	st, ok := o.alive[pid]
	return st, ok
}
func (o *fakeOS) KillGroup(pgid int, sig Signal) bool {
	o.killed = append(o.killed, strconv.Itoa(pgid)+":"+strconv.Itoa(int(sig)))
	return o.groups[pgid]
}

func fired(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

// Reap kills only groups a dead bot of this host and boot left, whose
// leader is the recorded process or gone; a recycled pid is not signalled.
func TestReapIdentity(t *testing.T) {
	base := Record{Host: "h", BootID: "b", PGID: 200, PID: 200, StartTime: 7, Kind: KindMCP, Name: "files", OwnerPID: 900, OwnerStart: 40}
	cases := []struct {
		name       string
		mod        func(*Record)
		alive      map[int]uint64
		groups     map[int]bool
		wantKilled []string
		wantKept   bool
		wantN      int
	}{
		{name: "leader alive, same start", alive: map[int]uint64{200: 7}, groups: map[int]bool{200: true}, wantKilled: []string{"200:15", "200:9"}, wantN: 1},
		{name: "leader gone, grandchild alive", groups: map[int]bool{200: true}, wantKilled: []string{"200:15", "200:9"}, wantN: 1},
		{name: "leader gone, group gone", wantKilled: []string{"200:15"}},
		{name: "pid recycled", alive: map[int]uint64{200: 8}, groups: map[int]bool{200: true}},
		{name: "owner still runs", alive: map[int]uint64{900: 40, 200: 7}, groups: map[int]bool{200: true}, wantKept: true},
		{name: "owner pid recycled", alive: map[int]uint64{900: 41, 200: 7}, groups: map[int]bool{200: true}, wantKilled: []string{"200:15", "200:9"}, wantN: 1},
		{name: "another host", mod: func(r *Record) { r.Host = "other" }, alive: map[int]uint64{200: 7}, groups: map[int]bool{200: true}, wantKept: true},
		{name: "another boot", mod: func(r *Record) { r.BootID = "old" }, alive: map[int]uint64{200: 7}, groups: map[int]bool{200: true}},
		{name: "this process's own", mod: func(r *Record) { r.OwnerPID, r.OwnerStart = 1000, 50 }, alive: map[int]uint64{200: 7}, groups: map[int]bool{200: true}, wantKept: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := base
			if c.mod != nil {
				c.mod(&r)
			}
			st := &memStore{m: map[string]Record{r.Key(): r}}
			o := &fakeOS{alive: c.alive, groups: c.groups}
			reg := New(Options{}, Deps{Store: st, OS: o, After: fired, Log: zerolog.Nop()})
			n, err := reg.Reap(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n != c.wantN || !reflect.DeepEqual(o.killed, c.wantKilled) {
				t.Errorf("killed %d %v, want %d %v", n, o.killed, c.wantN, c.wantKilled)
			}
			left, _ := st.Processes(context.Background())
			if (len(left) == 1) != c.wantKept {
				t.Errorf("records left %v, want kept=%v", left, c.wantKept)
			}
		})
	}
}

// With the real OS: a process group (a shell and its grandchild sleep)
// recorded by a bot process that is gone is killed whole by Reap.
func TestReapKillsRealGroup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; exec sleep 301")
	cmd.SysProcAttr = SysProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = realOS{}.KillGroup(cmd.Process.Pid, SIGKILL); _ = cmd.Wait() })
	buf := make([]byte, 32)
	k, _ := out.Read(buf)
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(buf[:k])))
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", buf[:k], err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	o := realOS{}
	st := &memStore{m: map[string]Record{}}
	reg := New(Options{}, Deps{Store: st, After: fired, Log: zerolog.Nop()})
	release := reg.Started(context.Background(), cmd.Process.Pid, KindMCP, "files")
	_ = release // the bot "dies" before it can release
	recs, _ := st.Processes(context.Background())
	if len(recs) != 1 || recs[0].StartTime == 0 || recs[0].BootID != o.BootID() {
		t.Fatalf("recorded %+v", recs)
	}
	// As if recorded by a bot process that is gone now.
	r := recs[0]
	r.OwnerPID, r.OwnerStart = dead.Process.Pid, 1
	st.m[r.Key()] = r
	n, err := reg.Reap(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v", n, err)
	}
	_ = cmd.Wait()
	if _, alive := o.StartTime(grandchild); alive {
		// The grandchild is reparented and reaped by init; wait for that
		// bounded by the test, not by luck.
		deadline := time.Now().Add(10 * time.Second)
		for alive && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			_, alive = o.StartTime(grandchild)
		}
		if alive {
			t.Errorf("grandchild %d still alive after Reap", grandchild)
		}
	}
	if left, _ := st.Processes(context.Background()); len(left) != 0 {
		t.Errorf("records left: %+v", left)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(cmd.Process.Pid)); err == nil {
		if _, alive := o.StartTime(cmd.Process.Pid); alive {
			t.Error("leader alive after Reap")
		}
	}
}

func TestParseStartTime(t *testing.T) {
	stat := "1234 (a) b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 100"
	if v, ok := parseStartTime(stat); !ok || v != 987654 {
		t.Errorf("parseStartTime = %d, %v", v, ok)
	}
	if _, ok := parseStartTime(strings.Replace(stat, ") S ", ") Z ", 1)); ok {
		t.Error("a zombie counts as alive")
	}
}
