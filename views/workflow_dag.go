package views

import "unicode/utf8"

// DAG is a workflow's graph laid out for drawing as SVG on the server:
// steps in layers from left to right (a step one layer after its furthest
// parent), edges from a parent's right side to a child's left side,
// labelled when their condition is not success.
type DAG struct {
	Width, Height int
	Nodes         []DAGNode
	Edges         []DAGEdge
}

// DAGNode is one step's box.
type DAGNode struct {
	Name  string
	Label string // the name, cut to fit the box
	State string // "" in a definition; the step's state in a run
	X, Y  int
}

// DAGEdge is one edge, with its condition's label ("" for success).
type DAGEdge struct {
	X1, Y1, X2, Y2 int
	Label          string
	LX, LY         int
}

// DAGStep is a step as the layout needs it.
type DAGStep struct {
	Name  string
	State string
	After []DAGParent
}

// DAGParent is one edge into a step.
type DAGParent struct{ Step, On string }

// Sizes of the drawing, in SVG units.
const (
	DAGNodeW = 150
	DAGNodeH = 36
	dagGapX  = 70
	dagGapY  = 18
	dagPad   = 10
	// dagLabelChars is how much of a step's name fits its box.
	dagLabelChars = 18
)

// LayoutDAG lays steps out in layers. Steps are given in definition order
// and form a DAG (the engine refused cycles); a step naming an unknown
// parent is drawn as a root.
func LayoutDAG(steps []DAGStep) DAG {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		index[s.Name] = i
	}
	layer := make([]int, len(steps))
	done := make([]bool, len(steps))
	var depth func(i int, seen int) int
	depth = func(i int, seen int) int {
		if done[i] || seen > len(steps) {
			return layer[i]
		}
		l := 0
		for _, p := range steps[i].After {
			if j, ok := index[p.Step]; ok {
				l = max(l, depth(j, seen+1)+1)
			}
		}
		layer[i], done[i] = l, true
		return l
	}
	rows := map[int]int{} // steps placed so far in each layer
	var g DAG
	pos := make([][2]int, len(steps))
	for i, s := range steps {
		l := depth(i, 0)
		x := dagPad + l*(DAGNodeW+dagGapX)
		y := dagPad + rows[l]*(DAGNodeH+dagGapY)
		rows[l]++
		pos[i] = [2]int{x, y}
		label := s.Name
		if utf8.RuneCountInString(label) > dagLabelChars {
			label = string([]rune(label)[:dagLabelChars-1]) + "…"
		}
		g.Nodes = append(g.Nodes, DAGNode{Name: s.Name, Label: label, State: s.State, X: x, Y: y})
		g.Width = max(g.Width, x+DAGNodeW+dagPad)
		g.Height = max(g.Height, y+DAGNodeH+dagPad)
	}
	for i, s := range steps {
		for _, p := range s.After {
			j, ok := index[p.Step]
			if !ok {
				continue
			}
			e := DAGEdge{X1: pos[j][0] + DAGNodeW, Y1: pos[j][1] + DAGNodeH/2, X2: pos[i][0], Y2: pos[i][1] + DAGNodeH/2}
			if p.On != "" && p.On != "success" {
				e.Label = p.On
				e.LX, e.LY = (e.X1+e.X2)/2, (e.Y1+e.Y2)/2-4
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}
