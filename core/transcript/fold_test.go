package transcript

import (
	"reflect"
	"testing"
)

func TestFold(t *testing.T) {
	e := func(seq uint64, src Source, text string, target uint64) Entry {
		return Entry{Seq: seq, Source: src, Text: text, Target: target}
	}
	tests := []struct {
		name   string
		window []Entry
		want   []Folded
	}{
		{"plain", []Entry{e(1, SourceUser, "a", 0)},
			[]Folded{{Entry: e(1, SourceUser, "a", 0), Latest: "a"}}},
		{"latest edit wins", []Entry{e(1, SourceUser, "a", 0), e(2, SourceEdit, "b", 1), e(3, SourceEdit, "c", 1)},
			[]Folded{{Entry: e(1, SourceUser, "a", 0), Latest: "c", Edited: true},
				{Entry: e(2, SourceEdit, "b", 1), Latest: "b"}, {Entry: e(3, SourceEdit, "c", 1), Latest: "c"}}},
		{"deletion record", []Entry{e(1, SourceTurn, "a", 0), e(2, SourceEdit, "b", 1), e(3, SourceDeletion, "", 1)},
			[]Folded{{Entry: e(1, SourceTurn, "a", 0), Deleted: true},
				{Entry: e(2, SourceEdit, "b", 1), Latest: "b"}, {Entry: e(3, SourceDeletion, "", 1)}}},
		{"erased without its record", []Entry{{Seq: 1, Source: SourceUser, Deleted: true}},
			[]Folded{{Entry: Entry{Seq: 1, Source: SourceUser, Deleted: true}, Deleted: true}}},
		{"change of an entry outside the window", []Entry{e(5, SourceEdit, "x", 2)},
			[]Folded{{Entry: e(5, SourceEdit, "x", 2), Latest: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Fold(tt.window); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Fold:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestVisible(t *testing.T) {
	window := []Entry{{Seq: 1, Text: "a"}, {Seq: 2, Text: "b"}, {Seq: 3, Source: SourceEdit, Text: "A", Target: 1},
		{Seq: 4, Source: SourceDeletion, Target: 2}}
	got := Visible(window)
	if len(got) != 1 || got[0].Seq != 1 || got[0].Text != "A" {
		t.Fatalf("Visible = %+v, want only #1 with its edited text", got)
	}
}
