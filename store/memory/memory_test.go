package memory_test

import (
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/binding/bindingtest"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/delivery/deliverytest"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/transcript/transcripttest"
	"github.com/agentbot/agentbot/store/memory"
)

func TestBindingStore(t *testing.T) {
	bindingtest.Run(t, func(*testing.T) binding.Store { return memory.New() })
}

func TestTranscriptStore(t *testing.T) {
	transcripttest.Run(t, func(*testing.T) transcript.Store { return memory.New() })
}

func TestDeliveryStore(t *testing.T) {
	deliverytest.Run(t, func(*testing.T) delivery.Store { return memory.New() })
}
