package authz

import (
	"errors"
)

// ErrNoDirectory: no directory answers for the conversation's platform, so
// nobody's permissions there can be checked (the authority refuses).
var ErrNoDirectory = errors.New("no permission directory for the conversation's platform")
