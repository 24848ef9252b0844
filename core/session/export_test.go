package session

// Settle waits until every queued task has finished and keeps the manager
// open (Run drains once, for a stop).
func (m *Manager) Settle() { m.work.Idle() }
