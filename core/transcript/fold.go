package transcript

// Folded is an entry as the chat displays it after the edit and deletion
// records of its window (invariant 17): the one fold every reader uses
// (History, catch-up, inspect, the console, the audit and the Rule 1
// check).
type Folded struct {
	Entry // as stored: Text is the text first written ("" once erased)
	// Latest is the text the chat displays: the latest edit record's text,
	// or Entry.Text; "" when Deleted.
	Latest  string
	Edited  bool // an edit record in the window changed the text (never set when Deleted)
	Deleted bool // the message left the chat (erased, or a deletion record in the window)
}

// Shown reports whether the chat still displays the entry: not a change
// record, not deleted.
func (f Folded) Shown() bool { return !f.IsChange() && !f.Deleted }

// Fold returns every entry of window (change records included, so a
// reader can list them), in order, each with what the chat displays of
// it. A change record whose target is outside the window changes nothing.
func Fold(window []Entry) []Folded {
	edited := map[uint64]string{}
	deleted := map[uint64]bool{}
	for _, e := range window {
		switch e.Source {
		case SourceEdit:
			edited[e.Target] = e.Text // later records win
		case SourceDeletion:
			deleted[e.Target] = true
		}
	}
	out := make([]Folded, len(window))
	for i, e := range window {
		f := Folded{Entry: e, Latest: e.Text, Deleted: !e.IsChange() && (e.Deleted || deleted[e.Seq])}
		if t, ok := edited[e.Seq]; ok && !e.IsChange() && !f.Deleted {
			f.Latest, f.Edited = t, true
		}
		if f.Deleted {
			f.Latest = ""
		}
		out[i] = f
	}
	return out
}

// Visible returns the entries of window the chat still displays, each with
// its latest text: what the model sees of the window.
func Visible(window []Entry) []Entry {
	out := make([]Entry, 0, len(window))
	for _, f := range Fold(window) {
		if f.Shown() {
			e := f.Entry
			e.Text = f.Latest
			out = append(out, e)
		}
	}
	return out
}
