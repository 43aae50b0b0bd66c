package views

import "testing"

// TestLayoutDAGPutsEachStepAfterItsParents: a diamond with a failure edge
// is laid out in three layers, each child right of all its parents, the
// failure edge labelled and the success ones not; a long name is cut.
func TestLayoutDAGPutsEachStepAfterItsParents(t *testing.T) {
	g := LayoutDAG([]DAGStep{
		{Name: "extract"},
		{Name: "transform_with_a_very_long_name", After: []DAGParent{{Step: "extract"}}},
		{Name: "alert", After: []DAGParent{{Step: "extract", On: "failure"}}},
		{Name: "load", After: []DAGParent{{Step: "transform_with_a_very_long_name", On: "success"}, {Step: "extract"}}},
	})
	x := map[string]int{}
	for _, n := range g.Nodes {
		x[n.Name] = n.X
	}
	if !(x["extract"] < x["alert"] && x["alert"] == x["transform_with_a_very_long_name"] && x["transform_with_a_very_long_name"] < x["load"]) {
		t.Fatalf("layers: %v", x)
	}
	if len(g.Edges) != 4 {
		t.Fatalf("%d edges, want 4", len(g.Edges))
	}
	labels := 0
	for _, e := range g.Edges {
		if e.X2 <= e.X1 {
			t.Errorf("edge %+v goes backwards", e)
		}
		if e.Label != "" {
			labels++
			if e.Label != "failure" {
				t.Errorf("edge label %q", e.Label)
			}
		}
	}
	if labels != 1 {
		t.Fatalf("%d labelled edges, want the failure one", labels)
	}
	if l := g.Nodes[1].Label; len([]rune(l)) != dagLabelChars || l[len(l)-len("…"):] != "…" {
		t.Fatalf("a long name's label: %q", l)
	}
	if g.Width < x["load"]+DAGNodeW || g.Height < DAGNodeH {
		t.Fatalf("size %dx%d", g.Width, g.Height)
	}
}
