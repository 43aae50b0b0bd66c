package views

import (
	"context"
	"strconv"

	"github.com/a-h/templ"
)

// FormField is one field of a console form, in page order: Name is the key
// its errors are filed under (as the engine names it, "schedule.cron"), ID
// the id of its control (of its fieldset for a group of checkboxes), Label
// the catalog key of its short name, ErrID the id of its inline error when
// it is not errorID(Name). Group: the control is a fieldset of checkboxes.
type FormField struct {
	Name, ID, Label, ErrID string
	Group                  bool
}

// errID is the id of the field's inline error.
func (f FormField) errID() string {
	if f.ErrID != "" {
		return f.ErrID
	}
	return errorID(f.Name)
}

// FormSpec is a console form's fields in page order: what its error summary
// links to and which field takes the focus when the form comes back refused.
type FormSpec []FormField

// field is the spec of name, or a field whose id is its name.
func (s FormSpec) field(name string) FormField {
	for _, f := range s {
		if f.Name == name {
			return f
		}
	}
	return FormField{Name: name, ID: name}
}

// Knows reports whether the form has a place for field name.
func (s FormSpec) Knows(name string) bool {
	for _, f := range s {
		if f.Name == name {
			return true
		}
	}
	return false
}

// firstBad is the name of the first field in page order that has an error,
// "" when none has.
func (s FormSpec) firstBad(errs map[string]string) string {
	for _, f := range s {
		if errs[f.Name] != "" {
			return f.Name
		}
	}
	return ""
}

// Attrs are the attributes of the control of field name: with an error,
// aria-invalid and aria-describedby naming its message (and hints, the ids
// given), and autofocus on the first bad field, so a refused form puts the
// keyboard where the first fix is; without one, only the hints. A group of
// checkboxes (a fieldset, which aria-invalid does not apply to) gets
// data-invalid instead, and data-focus-first, which console.js follows by
// focusing its first box.
func (s FormSpec) Attrs(errs map[string]string, name string, hints ...string) templ.Attributes {
	a := templ.Attributes{}
	describedBy := ""
	if errs[name] != "" {
		f := s.field(name)
		describedBy = f.errID()
		first := s.firstBad(errs) == name
		switch {
		case f.Group:
			a["data-invalid"] = "true"
			if first {
				a["data-focus-first"] = "true"
			}
		default:
			a["aria-invalid"] = "true"
			if first {
				a["autofocus"] = true
			}
		}
	}
	for _, h := range hints {
		if h == "" {
			continue
		}
		if describedBy != "" {
			describedBy += " "
		}
		describedBy += h
	}
	if describedBy != "" {
		a["aria-describedby"] = describedBy
	}
	return a
}

// FocusFirst is autofocus for the control that takes the focus on a fresh
// form (no error): none when some field is refused, so that the first bad
// field has it.
func FocusFirst(errs map[string]string) templ.Attributes {
	if len(errs) > 0 {
		return nil
	}
	return templ.Attributes{"autofocus": true}
}

// ErrorLink is one line of a form's error summary: the field's name and
// message, linking to its control ("" Href: a field the form has no place
// for).
type ErrorLink struct {
	Href, Label, Message string
}

// Said is a field's message as a page says it apart from its field: the
// field's short name, then the message in the reader's language ("Cron
// expression: minute 61 is outside 0-59").
func (s FormSpec) Said(ctx context.Context, name, msg string) string {
	label := name
	if f := s.field(name); f.Label != "" {
		label = T(ctx, f.Label)
	}
	return label + T(ctx, "FieldSep") + Refusal(ctx, msg)
}

// summaryLinks are the error summary's lines: each bad field of the spec in
// page order, then the other messages as they are.
func (s FormSpec) summaryLinks(ctx context.Context, errs map[string]string, others []string) []ErrorLink {
	var out []ErrorLink
	for _, f := range s {
		msg := errs[f.Name]
		if msg == "" {
			continue
		}
		label := f.Name
		if f.Label != "" {
			label = T(ctx, f.Label)
		}
		out = append(out, ErrorLink{Href: "#" + f.ID, Label: label, Message: Refusal(ctx, msg)})
	}
	for _, o := range others {
		out = append(out, ErrorLink{Message: Refusal(ctx, o)})
	}
	return out
}

// Limit is what a text control with a length limit carries for console.js:
// maxlength, and the sentences its counter ("187 / 200", shown near the
// limit) and its paste note ("pasted text was cut to 200 characters") say.
// max comes from the engine's constant for the field.
func Limit(ctx context.Context, max int) templ.Attributes {
	return templ.Attributes{
		"maxlength":    strconv.Itoa(max),
		"data-limit":   strconv.Itoa(max),
		"data-counter": T(ctx, "FieldCounter", "N", "%N%", "Max", "%MAX%"),
		"data-cut":     T(ctx, "FieldPasteCut", "Max", "%MAX%"),
	}
}

// merge is the union of attribute sets, later ones winning.
func merge(sets ...templ.Attributes) templ.Attributes {
	out := templ.Attributes{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}
