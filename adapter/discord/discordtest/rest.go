package discordtest

import (
	"strings"
)

// Discord limits enforced by the emulator.
const (
	MaxContentLength       = 2000
	MaxWebhooksPerChannel  = 15
	maxNonceLength         = 25
	maxThreadNameLength    = 100
	maxWebhookNameLength   = 80
	defaultMessageListSize = 50
)

// buildRoutes returns the route table. Literal segments come before parameters where both match.
func (e *Emulator) buildRoutes() []route {
	rs := []route{
		{method: "GET", tmpl: "/gateway", public: true, h: e.getGateway},
		{method: "GET", tmpl: "/gateway/bot", h: e.getGatewayBot},
		{method: "GET", tmpl: "/users/@me", h: e.getMe},
		{method: "GET", tmpl: "/users/@me/guilds", h: e.listMyGuilds},
		{method: "GET", tmpl: "/applications/@me", h: e.getMyApplication},
		{method: "POST", tmpl: "/users/@me/channels", h: e.createDM},
		{method: "GET", tmpl: "/users/{user_id}", h: e.getUser},
		{method: "GET", tmpl: "/guilds/{guild_id}", h: e.getGuild},
		{method: "GET", tmpl: "/guilds/{guild_id}/channels", h: e.getGuildChannels},
		{method: "GET", tmpl: "/guilds/{guild_id}/members/{user_id}", h: e.getGuildMember},
		{method: "GET", tmpl: "/guilds/{guild_id}/roles", h: e.getGuildRoles},
		{method: "GET", tmpl: "/guilds/{guild_id}/threads/active", h: e.getActiveThreads},
		{method: "GET", tmpl: "/channels/{channel_id}", h: e.getChannel},
		{method: "PATCH", tmpl: "/channels/{channel_id}", h: e.patchChannel},
		{method: "DELETE", tmpl: "/channels/{channel_id}", h: e.deleteChannel},
		{method: "POST", tmpl: "/channels/{channel_id}/typing", h: e.typing},
		{method: "GET", tmpl: "/channels/{channel_id}/messages", h: e.listMessages},
		{method: "POST", tmpl: "/channels/{channel_id}/messages", h: e.createMessage},
		{method: "GET", tmpl: "/channels/{channel_id}/messages/{message_id}", h: e.getMessage},
		{method: "PATCH", tmpl: "/channels/{channel_id}/messages/{message_id}", h: e.editMessage},
		{method: "DELETE", tmpl: "/channels/{channel_id}/messages/{message_id}", h: e.deleteMessage},
		{method: "POST", tmpl: "/channels/{channel_id}/messages/{message_id}/threads", h: e.threadFromMessage},
		{method: "POST", tmpl: "/channels/{channel_id}/threads", h: e.threadStandalone},
		{method: "PUT", tmpl: "/channels/{channel_id}/thread-members/@me", h: e.joinThread},
		{method: "DELETE", tmpl: "/channels/{channel_id}/thread-members/@me", h: e.leaveThread},
		{method: "POST", tmpl: "/channels/{channel_id}/webhooks", h: e.createWebhook},
		{method: "GET", tmpl: "/channels/{channel_id}/webhooks", h: e.listWebhooks},
		{method: "GET", tmpl: "/webhooks/{webhook_id}", h: e.getWebhook},
		{method: "DELETE", tmpl: "/webhooks/{webhook_id}", h: e.deleteWebhook},
		{method: "GET", tmpl: "/webhooks/{webhook_id}/{webhook_token}", public: true, h: e.getWebhookWithToken},
		{method: "POST", tmpl: "/webhooks/{webhook_id}/{webhook_token}", public: true, h: e.executeWebhook},
		{method: "GET", tmpl: "/webhooks/{webhook_id}/{webhook_token}/messages/{message_id}", public: true, h: e.getWebhookMessage},
		{method: "PATCH", tmpl: "/webhooks/{webhook_id}/{webhook_token}/messages/{message_id}", public: true, h: e.editWebhookMessage},
		{method: "DELETE", tmpl: "/webhooks/{webhook_id}/{webhook_token}/messages/{message_id}", public: true, h: e.deleteWebhookMessage},
		{method: "GET", tmpl: "/applications/{application_id}/commands", h: e.getCommands},
		{method: "PUT", tmpl: "/applications/{application_id}/commands", h: e.putCommands},
		{method: "GET", tmpl: "/applications/{application_id}/guilds/{guild_id}/commands", h: e.getCommands},
		{method: "PUT", tmpl: "/applications/{application_id}/guilds/{guild_id}/commands", h: e.putCommands},
		{method: "POST", tmpl: "/interactions/{interaction_id}/{interaction_token}/callback", public: true, h: e.interactionCallback},
	}
	for i := range rs {
		rs[i].segs = splitPath(rs[i].tmpl)
		rs[i].global = !strings.HasPrefix(rs[i].tmpl, "/interactions/")
	}
	return rs
}
