package master

import "time"

// Candidate is a node that may be picked, with its priority as weight.
type Candidate struct {
	Name   string
	Weight int
	// Since is when the node joined: automatic picks that tie on weight
	// prefer the node that has served longest over a newcomer.
	Since time.Time
}

// PickWeighted picks one candidate with probability proportional to its weight.
// Weight 0 is never picked unless every weight is 0, then the pick is uniform.
// randN returns a uniform number in [0, n); inject it for deterministic tests.
func PickWeighted(cands []Candidate, randN func(n int64) int64) (Candidate, bool) {
	if len(cands) == 0 {
		return Candidate{}, false
	}
	var total int64
	for _, c := range cands {
		if c.Weight > 0 {
			total += int64(c.Weight)
		}
	}
	if total == 0 {
		return cands[randN(int64(len(cands)))], true
	}
	x := randN(total)
	for _, c := range cands {
		if c.Weight <= 0 {
			continue
		}
		if x < int64(c.Weight) {
			return c, true
		}
		x -= int64(c.Weight)
	}
	return cands[len(cands)-1], true // not reached
}

// PickWeightedN picks up to n distinct candidates, each by PickWeighted among the rest.
func PickWeightedN(cands []Candidate, n int, randN func(n int64) int64) []Candidate {
	rest := append([]Candidate(nil), cands...)
	var out []Candidate
	for len(out) < n && len(rest) > 0 {
		c, _ := PickWeighted(rest, randN)
		out = append(out, c)
		for i := range rest {
			if rest[i].Name == c.Name {
				rest = append(rest[:i], rest[i+1:]...)
				break
			}
		}
	}
	return out
}
