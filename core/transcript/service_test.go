package transcript_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

func newService() *transcript.Service {
	return transcript.NewService(memory.New(), clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)))
}

func TestAppendIdempotentOnDeliveryID(t *testing.T) {
	s := newService()
	ctx := context.Background()
	tests := []struct {
		name     string
		e        transcript.Entry
		wantSeq  uint64
		conflict bool
	}{
		{"first", transcript.Entry{Role: transcript.RoleAssistant, Text: "hello", DeliveryID: "d1"}, 1, false},
		{"same id same text", transcript.Entry{Role: transcript.RoleAssistant, Text: "hello", DeliveryID: "d1"}, 1, false},
		{"same id other text", transcript.Entry{Role: transcript.RoleAssistant, Text: "bye", DeliveryID: "d1"}, 1, true},
		{"no id never dedupes", transcript.Entry{Role: transcript.RoleUser, Text: "hello"}, 2, false},
		{"no id again", transcript.Entry{Role: transcript.RoleUser, Text: "hello"}, 3, false},
	}
	for _, tc := range tests {
		got, err := s.Append(ctx, "k", tc.e)
		if tc.conflict != errors.Is(err, transcript.ErrDeliveryConflict) || (!tc.conflict && err != nil) {
			t.Fatalf("%s: err = %v", tc.name, err)
		}
		if got.Seq != tc.wantSeq {
			t.Fatalf("%s: seq %d, want %d", tc.name, got.Seq, tc.wantSeq)
		}
		if got.MessageIDs == nil {
			t.Fatalf("%s: MessageIDs is nil", tc.name)
		}
	}
}

func TestHistoryFollowsGenerations(t *testing.T) {
	s := newService()
	ctx := context.Background()
	for i := range 5 {
		if _, err := s.Append(ctx, "k", transcript.Entry{Role: transcript.RoleUser, Text: fmt.Sprint("old", i)}); err != nil {
			t.Fatal(err)
		}
	}
	h, _ := s.History(ctx, "k", 3)
	if len(h) != 3 || h[0].Text != "old2" || h[2].Text != "old4" {
		t.Fatalf("history %+v", h)
	}
	gen, err := s.Reset(ctx, "k")
	if err != nil || gen != 1 {
		t.Fatalf("Reset = %d, %v", gen, err)
	}
	if h, _ := s.History(ctx, "k", 10); len(h) != 0 {
		t.Fatalf("history after reset %+v", h)
	}
	e, _ := s.Append(ctx, "k", transcript.Entry{Role: transcript.RoleAssistant, Text: "new"})
	if e.Generation != 1 || e.Seq != 6 {
		t.Fatalf("entry after reset %+v", e)
	}
	h, _ = s.History(ctx, "k", 10)
	if len(h) != 1 || h[0].Text != "new" {
		t.Fatalf("history %+v", h)
	}
	all, _ := s.Entries(ctx, "k", 0, 100)
	if len(all) != 6 {
		t.Fatalf("the record lost entries across reset: %d", len(all))
	}
}
