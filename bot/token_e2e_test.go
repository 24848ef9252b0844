package bot

import "testing"

// TestRotatedTokenReachesTheGateway: after a token reset (the emulator
// accepts only the new token from then on) and a reload with it, the bot
// re-identifies the gateway with the new token, so the next reconnect
// resumes instead of failing authentication and the bot keeps answering.
// A reload with a token the gateway refuses keeps the previous session.
func TestRotatedTokenReachesTheGateway(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	a, gw := h.app.discord, h.app.gateway
	st0 := h.emu.GatewayStats()

	h.emu.SetTokens("rotated-token")
	a.SetToken("rotated-token")
	waitUntil(t, h, "an IDENTIFY with the rotated token", func() bool { return h.emu.GatewayStats().Identifies > st0.Identifies && gw.Ready() })

	// The next reconnect resumes with the token the session identified with.
	st1 := h.emu.GatewayStats()
	h.emu.GatewayDrop()
	waitUntil(t, h, "a resume after the drop", func() bool { return h.emu.GatewayStats().Resumes > st1.Resumes })
	adSay(t, h, h.general.ID, adMention(h)+"still there after the rotation?")
	waitUntil(t, h, "the reply", func() bool {
		return countContaining(h.emu.Messages(h.general.ID), "still there after the rotation?") == 2
	})
	if st := h.emu.GatewayStats(); st.AuthFailures != 0 {
		t.Fatalf("gateway authentication refused %d times: %+v", st.AuthFailures, st)
	}

	// A token the gateway refuses (a typo in the reloaded file): the bot
	// identifies again with the token the gateway accepted.
	st2 := h.emu.GatewayStats()
	a.SetToken("typo-token")
	waitUntil(t, h, "the refused IDENTIFY and the one with the previous token", func() bool {
		st := h.emu.GatewayStats()
		return st.AuthFailures == 1 && st.Identifies > st2.Identifies && st.Connections == 1 && gw.Ready()
	})
	st3 := h.emu.GatewayStats()
	a.SetToken("rotated-token")
	waitUntil(t, h, "an IDENTIFY with the valid token again", func() bool { return h.emu.GatewayStats().Identifies > st3.Identifies && gw.Ready() })
	adSay(t, h, h.general.ID, adMention(h)+"and after the typo?")
	waitUntil(t, h, "the reply", func() bool { return countContaining(h.emu.Messages(h.general.ID), "and after the typo?") == 2 })
	finishBot(t, h, h.general.ID)
}
