package delivery

// Diagnostic is a warning about a confirmed delivery: a Rule 1 exception
// (the message was displayed and no transcript got an entry). Outbound
// reports it (OutboundDeps.Diagnose: metrics, logs), its outbox record
// keeps the reason, and producers that keep a run record (jobs) store it.
type Diagnostic struct {
	Level      string // DiagnosticWarn
	Reason     string // SkipOtherAgent or SkipNativeOnly
	DeliveryID string
	// SessionKey is the session the conversation routes to (no transcript
	// entry was written there).
	SessionKey string
	Detail     string
}

// DiagnosticWarn is the level of a Rule 1 exception.
const DiagnosticWarn = "warn"

// IsException reports whether a skip reason is a Rule 1 exception (as
// opposed to a turn reply, which the turn writes itself).
func IsException(reason string) bool {
	return reason == SkipOtherAgent || reason == SkipNativeOnly
}

// exceptionDetail says in words what a Rule 1 exception means.
func exceptionDetail(reason string) string {
	switch reason {
	case SkipOtherAgent:
		return "the conversation is bound to a different agent: sent, no transcript entry"
	case SkipNativeOnly:
		return "native-only payload (no text): sent, no transcript entry"
	}
	return ""
}

// Diagnostic returns the Rule 1 exception of this delivery, if it was one.
func (r Result) Diagnostic(deliveryID string) (Diagnostic, bool) {
	if !IsException(r.SkipReason) {
		return Diagnostic{}, false
	}
	return Diagnostic{Level: DiagnosticWarn, Reason: r.SkipReason, DeliveryID: deliveryID, Detail: exceptionDetail(r.SkipReason)}, true
}

// RecordDiagnostic returns the Rule 1 exception an outbox record holds, if any.
func RecordDiagnostic(r Record) (Diagnostic, bool) {
	if r.State != StateDelivered || !IsException(r.Reason) {
		return Diagnostic{}, false
	}
	return Diagnostic{Level: DiagnosticWarn, Reason: r.Reason, DeliveryID: r.Delivery.ID, Detail: exceptionDetail(r.Reason)}, true
}
