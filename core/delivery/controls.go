package delivery

import (
	"strconv"
	"strings"
)

// Controls are the interactive components a live message carries while it
// is live: they are sent with the post itself (never added by a later
// edit), and the final edit removes them.
type Controls struct {
	// StopRun, when set, adds a Stop button that stops this run (a
	// core/session Run.ID); the platform adapter routes its clicks.
	StopRun string
	// Buttons are further buttons, after the Stop button (an ACP agent's
	// permission options). The platform routes their clicks by CustomID;
	// it refuses more than it can display (Discord: 25 with Stop).
	Buttons []Button
}

// Empty reports whether c shows nothing.
func (c Controls) Empty() bool { return c.StopRun == "" && len(c.Buttons) == 0 }

// Button is one button of a live message's controls.
type Button struct {
	CustomID string
	Label    string
	Style    ButtonStyle
	// Optional: a platform without buttons (Matrix) leaves it out, as it
	// leaves out the Stop button, instead of refusing the message: a text
	// command does the same (an ACP command's Kill: !stop ends the turn
	// and its commands).
	Optional bool
}

// ButtonStyle is how a button looks (Discord's styles).
type ButtonStyle int

// Button styles.
const (
	ButtonPrimary ButtonStyle = iota
	ButtonSecondary
	ButtonSuccess
	ButtonDanger
)

// permissionPrefix starts the custom id of an agent's permission-request button: "acp:<request>:<option>".
const permissionPrefix = "acp:"

// PermissionButton is the custom id of the button that answers permission request request with option option (an
// ACP agent's request, acp.Manager.Choose): the one format the agent side builds and every platform adapter
// routes by, so no adapter imports the agent side.
func PermissionButton(request string, option int) string {
	return permissionPrefix + request + ":" + strconv.Itoa(option)
}

// IsPermissionButton reports whether a component custom id is one of the agent side's buttons: a permission
// option, or another button under the same prefix (a command's Kill, "acp:kill:<id>"), all answered by
// acp.Manager.Choose.
func IsPermissionButton(customID string) bool { return strings.HasPrefix(customID, permissionPrefix) }

// ParsePermissionButton returns the request and option a permission button answers.
func ParsePermissionButton(customID string) (request string, option int, ok bool) {
	rest, found := strings.CutPrefix(customID, permissionPrefix)
	if !found {
		return "", 0, false
	}
	request, n, found := strings.Cut(rest, ":")
	if !found {
		return "", 0, false
	}
	option, err := strconv.Atoi(n)
	if err != nil {
		return "", 0, false
	}
	return request, option, true
}
