package form

import "github.com/schedulemaster-go/schedulemaster/protocol"

// Labels reads the admin labels field of the node page, "key=value,
// key=value" ("" removes them): the labels, or what is wrong with them.
func Labels(typed string) (protocol.Labels, string) {
	l, err := protocol.ParseLabels(typed)
	if err != nil {
		return nil, err.Error()
	}
	return l, ""
}
