package discordtest

import (
	"slices"
	"strconv"
)

// Application flags (GET /applications/@me "flags"): the privileged gateway intents the
// application may request. Discord sets the *_LIMITED bit when the intent is switched on in the
// Developer Portal (Bot → Privileged Gateway Intents) for an unverified bot in under 100 servers,
// and the other bit once a verified bot is approved for it.
const (
	ApplicationFlagGatewayPresence                    = 1 << 12
	ApplicationFlagGatewayPresenceLimited             = 1 << 13
	ApplicationFlagGatewayGuildMembers                = 1 << 14
	ApplicationFlagGatewayGuildMembersLimited         = 1 << 15
	ApplicationFlagGatewayMessageContent              = 1 << 18
	ApplicationFlagGatewayMessageContentLimited       = 1 << 19
	DefaultApplicationFlags                           = ApplicationFlagGatewayMessageContentLimited
	intentGuildPresences                        int64 = 1 << 8
)

// privilegedIntents maps each privileged gateway intent to the application flags that allow it;
// IDENTIFY asking for one the application lacks is closed with 4014, as Discord does.
var privilegedIntents = []struct {
	intent int64
	flags  int
}{
	{intentGuildMembers, ApplicationFlagGatewayGuildMembers | ApplicationFlagGatewayGuildMembersLimited},
	{intentGuildPresences, ApplicationFlagGatewayPresence | ApplicationFlagGatewayPresenceLimited},
	{intentMessageContent, ApplicationFlagGatewayMessageContent | ApplicationFlagGatewayMessageContentLimited},
}

// disallowedIntentsLocked reports whether intents ask for a privileged intent the application
// is not allowed.
func (e *Emulator) disallowedIntentsLocked(intents int64) bool {
	for _, p := range privilegedIntents {
		if intents&p.intent != 0 && e.appFlags&p.flags == 0 {
			return true
		}
	}
	return false
}

// SetApplicationFlags replaces the application's flags (0 = no privileged intent enabled). Later
// IDENTIFYs asking for an intent the flags do not allow are closed with 4014; connected sessions
// are not affected (Discord applies the change at the next IDENTIFY too).
func (e *Emulator) SetApplicationFlags(flags int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.appFlags = flags
}

// getMyApplication is GET /applications/@me (a PrivateApplicationResponse).
func (e *Emulator) getMyApplication(*call) reply {
	return ok(map[string]any{
		"id": e.appID, "name": e.botUser.Username, "icon": nil, "description": "", "type": nil,
		"bot": e.botUser.wire(), "bot_public": true, "bot_require_code_grant": false,
		"verify_key": "0000000000000000000000000000000000000000000000000000000000000000",
		"flags":      e.appFlags, "flags_new": strconv.Itoa(e.appFlags), "redirect_uris": []any{},
		"interactions_endpoint_url": nil, "role_connections_verification_url": nil,
		"owner":                   map[string]any{"id": e.appOwner.ID, "username": e.appOwner.Username, "discriminator": "0", "global_name": nil, "avatar": nil},
		"approximate_guild_count": len(e.world.guildOrder), "approximate_user_install_count": 0,
		"approximate_user_authorization_count": 0, "explicit_content_filter": 0, "team": nil,
		"eligible_oauth2_scopes": []any{}, "integration_types_config": map[string]any{"0": map[string]any{}},
	})
}

// listMyGuilds is GET /users/@me/guilds: the bot's guilds in id order, with its guild-wide
// permissions; before/after/limit (1-200, default 200) page; with_counts adds the approximate
// counts.
func (e *Emulator) listMyGuilds(c *call) reply {
	limit := 200
	if s := c.q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 200 {
			return formError("limit", "NUMBER_TYPE_MAX", "int value should be less than or equal to 200 and greater than or equal to 1.")
		}
		limit = n
	}
	ids := []string{}
	for _, id := range e.world.guildOrder {
		if e.world.isMember(id, e.botUser.ID) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return cmpSnowflake(a, b) })
	before, after := c.q.Get("before"), c.q.Get("after")
	out := []any{}
	for _, id := range ids {
		if after != "" && cmpSnowflake(id, after) <= 0 || before != "" && cmpSnowflake(id, before) >= 0 {
			continue
		}
		if len(out) == limit {
			break
		}
		g := e.world.guilds[id]
		m := map[string]any{"id": g.ID, "name": g.Name, "icon": nil, "banner": nil, "owner": g.OwnerID == e.botUser.ID,
			"permissions": strconv.FormatInt(e.world.basePermissions(g.ID, e.botUser.ID), 10), "features": []any{}}
		if c.q.Get("with_counts") == "true" {
			m["approximate_member_count"] = len(e.world.members[id])
			m["approximate_presence_count"] = 0
		}
		out = append(out, m)
	}
	return ok(out)
}

// cmpSnowflake orders snowflake ids numerically.
func cmpSnowflake(a, b string) int {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
