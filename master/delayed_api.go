package master

// Delayed is the engine's delayed-task service.
func (m *Master) Delayed() *DelayedTasks { return m.delayed }
