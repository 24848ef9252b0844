package agentroute

import (
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// Place is where a conversation sits, as its platform asserts it.
type Place struct {
	// Category is the category of the conversation's channel (a thread's:
	// its parent channel's), "" when none or unknown.
	Category string
	// Server is the Discord guild of the conversation, "" for a DM, an
	// unknown channel or a platform without servers (Matrix).
	Server string
	// Parent is a thread's parent channel when the conversation's ref did
	// not carry it (a delivery target names the thread alone).
	Parent string
}

// Locator tells where a conversation sits (the platform adapter, from what
// the platform told it: Discord's gateway cache). It does no I/O; an
// unknown conversation is the zero Place.
type Locator interface {
	Place(ref binding.ConversationRef) Place
}

// Claim is one agent's configured ids (agents[].channels).
type Claim struct {
	Agent string
	IDs   []string
}

// By says which claim decided a route.
type By string

// Route reasons, most specific first.
const (
	ByConversation By = "conversation" // the conversation's own id is claimed
	ByParent       By = "parent"       // a thread follows its parent channel (room)
	ByCategory     By = "category"     // the channel's category
	ByServer       By = "server"       // the conversation's server (guild)
	ByDefault      By = "default"      // nothing claims it: the default agent
	ByDM           By = "dm"           // a direct message: the default agent
)

// Route is the agent that answers in a conversation, and why.
type Route struct {
	Agent string
	By    By
	// ID is the claimed id that decided it ("" for ByDefault and ByDM).
	ID string
}

// Table resolves conversations to agents. Safe for concurrent use; it is
// not changed after New.
type Table struct {
	def    string
	owner  map[string]string // claimed id -> agent
	places Locator           // nil: conversations are matched by their own ids only
}

// OverlapError is two agents claiming one id (config validation names
// the keys; this guards a table built otherwise).
type OverlapError struct {
	ID            string
	First, Second string // the agents, in configuration order
}

func (e *OverlapError) Error() string {
	return fmt.Sprintf("channel id %q is claimed by agents %q and %q; an id may route to one agent only", e.ID, e.First, e.Second)
}

// New returns the table of claims; the default agent answers where no
// claim does. places tells where each conversation sits (the platform
// table, which asks the conversation's own platform; a conversation it
// knows nothing of, or a nil places, is matched by its own ids only). Two
// agents claiming one id is an *OverlapError.
func New(defaultAgent string, claims []Claim, places Locator) (*Table, error) {
	t := &Table{def: defaultAgent, owner: map[string]string{}, places: places}
	for _, c := range claims {
		for _, id := range c.IDs {
			id = strings.TrimSpace(id)
			if id == "" {
				continue
			}
			if prev, ok := t.owner[id]; ok && prev != c.Agent {
				return nil, &OverlapError{ID: id, First: prev, Second: c.Agent}
			}
			t.owner[id] = c.Agent
		}
	}
	return t, nil
}

// Resolve returns the agent that answers in ref, and why.
func (t *Table) Resolve(ref binding.ConversationRef) Route {
	n := ref.Normalize()
	if strings.HasPrefix(n.ConversationID, sessionkey.DMPrefix) {
		return Route{Agent: t.def, By: ByDM}
	}
	if len(t.owner) == 0 {
		return Route{Agent: t.def, By: ByDefault}
	}
	var p Place
	if t.places != nil {
		p = t.places.Place(n)
	}
	parent := n.ParentConversationID
	if parent == "" {
		parent = p.Parent
	}
	for _, c := range []struct {
		id string
		by By
	}{{n.ConversationID, ByConversation}, {parent, ByParent}, {p.Category, ByCategory}, {p.Server, ByServer}} {
		if a, ok := t.owner[c.id]; ok && c.id != "" {
			return Route{Agent: a, By: c.by, ID: c.id}
		}
	}
	return Route{Agent: t.def, By: ByDefault}
}

// Agent is the agent that answers in ref.
func (t *Table) Agent(ref binding.ConversationRef) string {
	if t == nil {
		return ""
	}
	return t.Resolve(ref).Agent
}

// Why is a route's reason as a clause for people ("this channel is in its
// agents[].channels").
func (r Route) Why() string {
	switch r.By {
	case ByConversation:
		return fmt.Sprintf("this conversation (%s) is in its channels", r.ID)
	case ByParent:
		return fmt.Sprintf("this thread follows its parent %s, which is in its channels", r.ID)
	case ByCategory:
		return fmt.Sprintf("this channel's category %s is in its channels", r.ID)
	case ByServer:
		return fmt.Sprintf("this server %s is in its channels", r.ID)
	case ByDM:
		return "direct messages go to the default agent"
	default:
		return "no agent's channels name this conversation, its parent, category or server, so the default agent answers"
	}
}
