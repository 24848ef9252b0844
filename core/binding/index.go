package binding

// index is the in-memory index of the active bindings, served to the hot
// routing path: by conversation (numeric ids by their number), by id and
// by session, over an arena. It is not safe for concurrent use: Service
// holds its lock around every call.
type index struct {
	// byNum indexes conversations with numeric ids (Discord snowflakes) by
	// the number, so a lookup compares integers instead of cold strings;
	// byConv holds every other active binding.
	byNum     map[uint64]*Record
	byConv    map[convKey]*Record
	byID      map[string]*Record
	bySession map[string]map[string]*Record
	arena     arena // active records, stored contiguously
}

func newIndex() index {
	return index{byNum: map[uint64]*Record{}, byConv: map[convKey]*Record{}, byID: map[string]*Record{},
		bySession: map[string]map[string]*Record{}}
}

// convKey is the normalised identity of a conversation, used as a map key
// without building a string (ResolveByConversation must not allocate).
// parent is set only for a conversation whose id does not name it alone
// (ScopedByParent: a Matrix thread is its root event in its room).
type convKey struct{ channel, account, conversation, parent string }

func keyOf(r ConversationRef) convKey {
	return keyOfNormal(r.Normalize())
}

func keyOfNormal(n ConversationRef) convKey {
	k := convKey{channel: n.Channel, account: n.AccountID, conversation: n.ConversationID}
	if ScopedByParent(n.ConversationID) {
		k.parent = n.ParentConversationID
	}
	return k
}

// add stores a copy of rec in the arena and indexes it.
func (x *index) add(rec Record) {
	r := x.arena.alloc(rec)
	if n, ok := numericID(r.Conversation.ConversationID); ok && x.byNum[n] == nil {
		x.byNum[n] = r
	} else {
		x.byConv[keyOf(r.Conversation)] = r
	}
	x.byID[r.ID] = r
	m := x.bySession[r.TargetSessionKey]
	if m == nil {
		m = map[string]*Record{}
		x.bySession[r.TargetSessionKey] = m
	}
	m[r.ID] = r
}

// remove unindexes r and releases its slot.
func (x *index) remove(r *Record) {
	if n, ok := numericID(r.Conversation.ConversationID); ok && x.byNum[n] == r {
		delete(x.byNum, n)
	}
	if cur := x.byConv[keyOf(r.Conversation)]; cur == r {
		delete(x.byConv, keyOf(r.Conversation))
	}
	delete(x.byID, r.ID)
	if m := x.bySession[r.TargetSessionKey]; m != nil {
		delete(m, r.ID)
		if len(m) == 0 {
			delete(x.bySession, r.TargetSessionKey)
		}
	}
	x.arena.release(r)
}

// lookup finds the active record of a normalised ref.
func (x *index) lookup(ref ConversationRef) *Record {
	if n, ok := numericID(ref.ConversationID); ok {
		if r := x.byNum[n]; r != nil && r.Conversation.Channel == ref.Channel && r.Conversation.AccountID == ref.AccountID {
			return r
		}
	}
	return x.byConv[keyOfNormal(ref)]
}

// numericID parses a canonical decimal id (no sign, no leading zero).
func numericID(id string) (uint64, bool) {
	if id == "" || len(id) > 19 || id[0] == '0' {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// arenaChunk is how many records an arena chunk holds.
const arenaChunk = 1024

// arena keeps the active records in contiguous chunks instead of one heap
// object each: the routing hot path touches a record per lookup, and
// packed records need far fewer cache lines and pages than scattered ones.
// A released slot is reused; a record's address is stable while indexed.
type arena struct {
	chunks []*[arenaChunk]Record
	used   int // slots handed out from the last chunk onwards
	free   []*Record
}

func (a *arena) alloc(r Record) *Record {
	if k := len(a.free); k > 0 {
		p := a.free[k-1]
		a.free = a.free[:k-1]
		*p = r
		return p
	}
	if a.used%arenaChunk == 0 {
		a.chunks = append(a.chunks, new([arenaChunk]Record))
	}
	p := &a.chunks[len(a.chunks)-1][a.used%arenaChunk]
	a.used++
	*p = r
	return p
}

// release returns a slot; the record must no longer be indexed or read.
func (a *arena) release(p *Record) {
	*p = Record{}
	a.free = append(a.free, p)
}
