
// TestGatewayAccessGate (issue 26.4): Matrix messages pass the same access gate as Discord's: a denied user's
// mention reaches no session; over the turn budget the first refused message gets one short notice in the room and
// the next silence.
func TestGatewayAccessGate(t *testing.T) {
	e := newEnv(t)
	carol, carolCli := e.userClient(t, "carol")
	gate := authz.NewGate(authz.Policy{DM: authz.DMMembers, Deny: authz.Lists{Users: []string{carol}}}, authz.Limits{Turns: 1, Per: time.Hour}, clock.Real{})
	k := startStack(t, e, newStores(), func(o *stackOpts) { o.gate = gate })
	e.joinAs(t, carol, carolCli)
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}

	denied := sendIn(t, carolCli, e.room, mention("bot: let me in", e.bot.UserID))
	first := e.say(t, mention("bot: one", e.bot.UserID))
	k.waitHanded(t, first)
	over := e.say(t, mention("bot: two", e.bot.UserID))
	silent := e.say(t, mention("bot: three", e.bot.UserID))
	es := k.waitEntries(t, room, 3)
	deadline := time.Now().Add(2 * time.Second)
	for len(es) < 4 && time.Now().Before(deadline) { // a wrong fourth entry (a second notice) would show by now
		<-time.After(50 * time.Millisecond) // giving the sync loop a moment past the last message
		es = k.waitEntries(t, room, 3)
	}
	if len(es) != 3 || es[0].MessageIDs[0] != first || es[2].Source != transcript.SourceNotice || !strings.HasPrefix(es[2].Text, "⏳ alice, you have used your 1 turns") {
		t.Fatalf("room entries %+v; want the first message, its answer and one budget notice", es)
	}
	for _, m := range k.sessions.handed() {
		if m.MessageID == denied || m.MessageID == over || m.MessageID == silent {
			t.Errorf("message %s (%q) reached the session past the gate", m.MessageID, m.Text)
		}
	}
}
