package delivery_test

import (
	"testing"

	"github.com/agentbot/agentbot/core/delivery"
)

// TestPermissionButton: the one custom-id format of a permission button round-trips; anything else is no
// permission button.
func TestPermissionButton(t *testing.T) {
	id := delivery.PermissionButton("req-7", 2)
	if !delivery.IsPermissionButton(id) {
		t.Fatalf("%q is not recognised", id)
	}
	if req, opt, ok := delivery.ParsePermissionButton(id); !ok || req != "req-7" || opt != 2 {
		t.Fatalf("parse %q = %q %d %v", id, req, opt, ok)
	}
	for _, bad := range []string{"stop:1", "acp:", "acp:req", "acp:req:x", ""} {
		if _, _, ok := delivery.ParsePermissionButton(bad); ok {
			t.Errorf("%q parsed as a permission button", bad)
		}
	}
	if delivery.IsPermissionButton("stop:1") {
		t.Error("a stop button counts as a permission button")
	}
}
