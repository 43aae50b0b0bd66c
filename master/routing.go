package master

import (
	"cmp"
	"slices"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Route is what a routing strategy may look at to rank the claimants of one
// fire. Every field is read from the database, so every master ranks alike.
type Route struct {
	// Strategy is the task's routing (protocol.Routing*); "" is weighted.
	Strategy string
	TaskID   string
	Fire     time.Time
	// Last is the winner of the task's previous fire (round_robin).
	Last string
	// Key is the value of the task's routing_key param (hash).
	Key string
	// Busy counts each node's recent claims (least_busy).
	Busy map[string]int
}

// RankRoute orders the claimants of a fire best first by the route's
// strategy. It is pure and deterministic: the same route and candidates give
// the same order on every master. Broadcast has no claim and ranks as weighted.
func RankRoute(r Route, cands []Candidate) []Candidate {
	switch r.Strategy {
	case protocol.RoutingRoundRobin:
		return RankRoundRobin(r.Last, cands)
	case protocol.RoutingFailover:
		return RankFailover(cands)
	case protocol.RoutingLeastBusy:
		return RankLeastBusy(r.TaskID, r.Fire, r.Busy, cands)
	case protocol.RoutingHash:
		return RankHash(r.TaskID, r.Key, cands)
	default:
		return RankClaimants(r.TaskID, r.Fire, cands)
	}
}

// RankRoundRobin orders the candidates by name, starting with the first name
// after last (the previous fire's winner) and wrapping around, so fires take
// turns. A winner that left the fleet is passed over by name order.
func RankRoundRobin(last string, cands []Candidate) []Candidate {
	out := slices.Clone(cands)
	slices.SortFunc(out, func(a, b Candidate) int { return cmp.Compare(a.Name, b.Name) })
	i, _ := slices.BinarySearchFunc(out, last, func(c Candidate, name string) int { return cmp.Compare(c.Name, name) })
	if i < len(out) && out[i].Name == last {
		i++
	}
	i %= max(len(out), 1)
	return append(out[i:], out[:i]...)
}

// RankFailover orders the candidates by priority, highest first, then by
// seniority (a newcomer never outranks a node that has served longer), then
// by name: the first running one always wins, the next when it is down.
func RankFailover(cands []Candidate) []Candidate {
	out := slices.Clone(cands)
	slices.SortFunc(out, func(a, b Candidate) int {
		if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
			return c
		}
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// RankLeastBusy orders the candidates by busy count, fewest first; equal
// counts keep their weighted rendezvous order for the fire.
func RankLeastBusy(taskID string, fire time.Time, busy map[string]int, cands []Candidate) []Candidate {
	out := RankClaimants(taskID, fire, cands)
	slices.SortStableFunc(out, func(a, b Candidate) int { return cmp.Compare(busy[a.Name], busy[b.Name]) })
	return out
}

// RankHash orders the candidates by rendezvous hash of the key in place of
// the fire time: the same key ranks the same node first as long as that node
// runs, and a node leaving moves only the keys it had.
func RankHash(taskID, key string, cands []Candidate) []Candidate {
	type scored struct {
		c Candidate
		u float64
	}
	s := make([]scored, len(cands))
	for i, c := range cands {
		s[i] = scored{c, rendezvousU(taskID, "key:"+key, c.Name)}
	}
	slices.SortFunc(s, func(a, b scored) int {
		if c := cmp.Compare(a.u, b.u); c != 0 {
			return c
		}
		return cmp.Compare(a.c.Name, b.c.Name)
	})
	out := make([]Candidate, len(s))
	for i := range s {
		out[i] = s[i].c
	}
	return out
}
