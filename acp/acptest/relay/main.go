// Command relay is the sandbox relay for tests (the bot runs it as
// `bot sandbox-relay`).
package main

import (
	"os"

	"github.com/agentbot/agentbot/acp"
)

func main() { os.Exit(acp.RelayMain(os.Args[1:])) }
