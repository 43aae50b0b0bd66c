package master

import (
	"math/rand/v2"
	"testing"
)

func TestPickWeightedDeterministicAndProportional(t *testing.T) {
	t.Parallel()
	cands := []Candidate{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}, {Name: "c", Weight: 2}, {Name: "z", Weight: 0}}
	// A fixed sequence picks fixed nodes: x in [0,1) a, [1,2) b, [2,4) c.
	for x, want := range map[int64]string{0: "a", 1: "b", 2: "c", 3: "c"} {
		got, ok := PickWeighted(cands, func(int64) int64 { return x })
		if !ok || got.Name != want {
			t.Errorf("x=%d: got %s, want %s", x, got.Name, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	counts := map[string]int{}
	const n = 40000
	for i := 0; i < n; i++ {
		c, _ := PickWeighted(cands, r.Int64N)
		counts[c.Name]++
	}
	if counts["z"] != 0 {
		t.Fatalf("weight 0 was picked %d times", counts["z"])
	}
	for name, share := range map[string]float64{"a": 0.25, "b": 0.25, "c": 0.5} {
		got := float64(counts[name]) / n
		if got < share-0.02 || got > share+0.02 {
			t.Errorf("%s share %.3f, want %.2f±0.02", name, got, share)
		}
	}
	if _, ok := PickWeighted(nil, r.Int64N); ok {
		t.Fatal("picked from no candidates")
	}
	allZero := []Candidate{{Name: "x", Weight: 0}, {Name: "y", Weight: 0}}
	if c, ok := PickWeighted(allZero, func(int64) int64 { return 1 }); !ok || c.Name != "y" {
		t.Fatalf("all-zero weights: got %v", c)
	}
}

func TestPickWeightedNDistinct(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	cands := []Candidate{{Name: "a", Weight: 1}, {Name: "b", Weight: 5}, {Name: "c", Weight: 1}}
	for i := 0; i < 100; i++ {
		got := PickWeightedN(cands, 2, r.Int64N)
		if len(got) != 2 || got[0].Name == got[1].Name {
			t.Fatalf("picked %v", got)
		}
	}
	if got := PickWeightedN(cands[:1], 2, r.Int64N); len(got) != 1 {
		t.Fatalf("asked 2 of 1: %v", got)
	}
}
