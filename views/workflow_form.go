package views

import (
	"context"
	"slices"
	"strconv"

	"github.com/a-h/templ"
)

// ScheduleManual is the workflow form's schedule kind of a workflow that
// runs by hand (or by the API) only.
const ScheduleManual = "manual"

// Workflow form changes: the buttons that add and remove rows post the form
// with op set to one of these (with the row's numbers, see StepOp and
// EdgeOp), and it comes back changed, nothing saved.
const (
	OpAddStep    = "add-step"
	OpRemoveStep = "remove-step"
	OpAddEdge    = "add-edge"
	OpRemoveEdge = "remove-edge"
	// OpProject shows the tasks of the project chosen.
	OpProject = "project"
)

// StepOp is the op of a button that changes step i's rows (OpRemoveStep,
// OpAddEdge).
func StepOp(op string, i int) string { return op + ":" + strconv.Itoa(i) }

// EdgeOp is the op of the button that removes edge j of step i.
func EdgeOp(i, j int) string { return OpRemoveEdge + ":" + strconv.Itoa(i) + ":" + strconv.Itoa(j) }

// StepFieldID is the id of a control of step i's row in the workflow form
// ("steps-2-task").
func StepFieldID(i int, field string) string { return "steps-" + strconv.Itoa(i) + "-" + field }

// EdgeFieldID is the id of a control of edge j of step i ("steps-2-after-0-on").
func EdgeFieldID(i, j int, field string) string {
	return "steps-" + strconv.Itoa(i) + "-after-" + strconv.Itoa(j) + "-" + field
}

// stepKey is the name of a step's field as the form posts it and the
// engine files its errors ("steps[2].task").
func stepKey(i int, field string) string { return "steps[" + strconv.Itoa(i) + "]." + field }

// edgeKey is the name of an edge's field ("steps[2].after[0].on"); the
// engine files what is wrong with the edge itself under its name without a
// field ("steps[2].after[0]").
func edgeKey(i, j int, field string) string {
	k := "steps[" + strconv.Itoa(i) + "].after[" + strconv.Itoa(j) + "]"
	if field != "" {
		k += "." + field
	}
	return k
}

// wfField is a field of the workflow form: step is the number of the step
// row it belongs to (-1: none), edge the number of its edge (-1: none).
type wfField struct {
	FormField
	step, edge int
}

// fields are the workflow form's fields in page order.
func (vm WorkflowFormVM) fields() []wfField {
	top := func(name, id, label string) wfField {
		return wfField{FormField: FormField{Name: name, ID: id, Label: label}, step: -1, edge: -1}
	}
	out := []wfField{top("project", "project", "NavProject"), top("title", "title", "ColTitle"),
		top("key", "key", "WorkflowColKey")}
	steps := top("steps", "steps-section", "WorkflowStepsHeading")
	steps.Group = true
	out = append(out, steps)
	for i, s := range vm.Steps {
		for _, f := range []struct{ field, label string }{{"name", "WorkflowStepName"}, {"task", "ColTask"},
			{"timeout", "FieldTimeout"}, {"params", "FoldParams"}} {
			out = append(out, wfField{FormField: FormField{Name: stepKey(i, f.field), ID: StepFieldID(i, f.field), Label: f.label,
				ErrID: "error-" + StepFieldID(i, f.field)}, step: i, edge: -1})
		}
		for j := range s.After {
			out = append(out,
				wfField{FormField: FormField{Name: edgeKey(i, j, ""), ID: EdgeFieldID(i, j, "step"), Label: "WorkflowColAfter",
					ErrID: "error-" + EdgeFieldID(i, j, "step")}, step: i, edge: j},
				wfField{FormField: FormField{Name: edgeKey(i, j, "on"), ID: EdgeFieldID(i, j, "on"), Label: "WorkflowEdgeOn",
					ErrID: "error-" + EdgeFieldID(i, j, "on")}, step: i, edge: j})
		}
		out = append(out, wfField{FormField: FormField{Name: "steps[" + strconv.Itoa(i) + "].after", ID: StepFieldID(i, "after"),
			Label: "WorkflowColAfter", ErrID: "error-" + StepFieldID(i, "after"), Group: true}, step: i, edge: -1})
	}
	for _, f := range []wfField{top("schedule.kind", "schedule-kind", "FieldScheduleKind"), top("schedule.cron", "schedule-cron", "FieldCron"),
		top("schedule.every", "schedule-every", "FieldEvery"), top("schedule.align", "schedule-align", "FieldAlign"),
		top("schedule.at", "schedule-at", "FieldAt"), top("timezone", "timezone", "FieldTimezone"),
		top("start_at", "start-at", "FieldNotBefore"), top("end_at", "end-at", "FieldNotAfter"),
		top("overlap", "overlap", "TaskOverlap"), top("misfire", "misfire", "TaskMisfire"),
		top("timeout", "timeout", "FieldTimeout"), top("params", "params", "FoldParams")} {
		out = append(out, f)
	}
	return out
}

// spec is the form's FormSpec: what marks its bad fields and focuses the
// first.
func (vm WorkflowFormVM) spec() FormSpec {
	fs := vm.fields()
	out := make(FormSpec, len(fs))
	for i, f := range fs {
		out[i] = f.FormField
	}
	return out
}

// Knows reports whether the workflow form has a place for field name.
func (vm WorkflowFormVM) Knows(name string) bool { return vm.spec().Knows(name) }

// summaryLinks are the lines of the form's error summary: each bad field in
// page order, named with its step ("Step 2 (load) · Task"), then the
// others.
func (vm WorkflowFormVM) summaryLinks(ctx context.Context) []ErrorLink {
	var out []ErrorLink
	for _, f := range vm.fields() {
		msg := vm.Errors[f.Name]
		if msg == "" {
			continue
		}
		label := T(ctx, f.Label)
		if f.step >= 0 {
			label = vm.stepTitle(ctx, f.step) + " · " + label
			if f.edge >= 0 {
				label += " " + strconv.Itoa(f.edge+1)
			}
		}
		out = append(out, ErrorLink{Href: "#" + f.ID, Label: label, Message: Refusal(ctx, msg)})
	}
	for _, o := range vm.OtherErrors {
		out = append(out, ErrorLink{Message: Refusal(ctx, o)})
	}
	return out
}

// stepTitle names step row i: "Step 2", or "Step 2 (load)" once named.
func (vm WorkflowFormVM) stepTitle(ctx context.Context, i int) string {
	t := T(ctx, "WorkflowStepN", "N", i+1)
	if i < len(vm.Steps) && vm.Steps[i].Name != "" {
		t += " (" + vm.Steps[i].Name + ")"
	}
	return t
}

// attrs are the attributes of the control of field name (id: its id):
// marked when refused, and focused when it is where the form's rows just
// changed or, on a fresh form, when it is the first field.
func (vm WorkflowFormVM) attrs(spec FormSpec, name, id string, hints ...string) templ.Attributes {
	a := spec.Attrs(vm.Errors, name, hints...)
	if len(vm.Errors) == 0 && (vm.Focus == id || vm.Focus == "" && id == "title") {
		a["autofocus"] = true
	}
	return a
}

// focus is autofocus for a control that is no field (a button) when the
// form's rows just changed there.
func (vm WorkflowFormVM) focus(id string) templ.Attributes {
	if len(vm.Errors) == 0 && vm.Focus == id {
		return templ.Attributes{"autofocus": true}
	}
	return nil
}

// stepNames are the steps named so far: what an edge may name.
func (vm WorkflowFormVM) stepNames() []string {
	var out []string
	for _, s := range vm.Steps {
		if s.Name != "" && !slices.Contains(out, s.Name) {
			out = append(out, s.Name)
		}
	}
	return out
}

// workflowPreviewInputs are the inputs the workflow form's schedule preview
// reads: its schedule's, and the workflow's id (a spread interval and H
// forms place the fires by it).
const workflowPreviewInputs = "#timezone, #schedule-kind, #schedule-cron, #schedule-every, #schedule-align, #schedule-at, #start-at, #end-at, #workflow-id"

// workflowPreviewAttrs make a schedule input of the workflow form refresh
// its preview of the next fires as it is typed in.
func workflowPreviewAttrs() templ.Attributes {
	return templ.Attributes{"hx-get": "/schedules/preview", "hx-trigger": "input changed delay:300ms",
		"hx-include": workflowPreviewInputs, "hx-target": "#schedule-preview", "hx-swap": "outerHTML"}
}
