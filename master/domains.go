package master

// The engine's domains. Each owns the rules of one kind of thing (its
// names, its limits, its state changes) and is reached through an accessor
// of the facade, as Accounts() is: m.Tasks().Create, m.Nodes().Enable. A
// domain keeps a pointer to the engine for the services it shares with the
// others (the store, the event log, the lease, the worker client); the
// facade keeps only the engine's life (Start, Stop, leadership, health) and
// the accessors. A new kind of thing becomes a domain here, not methods on
// *Master; TestFacadeStaysSmall holds the bound.

// Tasks is the task domain: input checks, saves (one, many, copies),
// dispatch to executors (start, stop, pause, resume, run once), bulk
// actions, schedule sharding and the pages of tasks a worker fetches.
type Tasks struct{ m *Master }

// Nodes is the node domain: workers and masters as rows (create, update,
// delete, connect, enable, disable, approve, labels), their health history
// and their clock skews.
type Nodes struct{ m *Master }

// Projects is the project domain: projects, their names and their members.
type Projects struct{ m *Master }

// Pools is the pool domain: pools of workers by label, their approval, the
// selectors tasks use and the memberships pushed to workers.
type Pools struct{ m *Master }

// Runs is the run domain: runs reported by workers, their lists, a run's
// live output, killing a run, and purging old runs.
type Runs struct{ m *Master }

// Tasks is the engine's task domain.
func (m *Master) Tasks() *Tasks { return m.tasks }

// Nodes is the engine's node domain.
func (m *Master) Nodes() *Nodes { return m.nodes }

// Projects is the engine's project domain.
func (m *Master) Projects() *Projects { return m.projects }

// Pools is the engine's pool domain.
func (m *Master) Pools() *Pools { return m.pools }

// Runs is the engine's run domain.
func (m *Master) Runs() *Runs { return m.runsDomain }
