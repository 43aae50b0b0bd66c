package views

import (
	"context"
	"regexp"

	"github.com/schedulemaster-go/schedulemaster/locale"
)

// refusalText is one engine sentence the console says in the reader's
// language: the pattern of the English sentence and the message whose
// placeholders (Names, in order) take its groups.
type refusalText struct {
	re    *regexp.Regexp
	id    string
	names []string
}

// refusalTexts are the engine's refusals and field errors people meet most
// on pages. A sentence not listed stays as the engine wrote it (English).
var refusalTexts = []refusalText{
	{regexp.MustCompile(`^is required$`), "RefRequired", nil},
}

// Refusal says an engine sentence (a refusal or a field error) in the
// reader's language when the catalogs know it, else as it is.
func Refusal(ctx context.Context, msg string) string { return RefusalIn(locale.From(ctx), msg) }

// RefusalIn is Refusal in the language of l.
func RefusalIn(l *locale.Localizer, msg string) string {
	if !l.Chinese() || msg == "" {
		return msg
	}
	for _, r := range refusalTexts {
		m := r.re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		kv := make([]any, 0, 2*len(r.names))
		for i, n := range r.names {
			kv = append(kv, n, m[i+1])
		}
		return l.T(r.id, kv...)
	}
	return msg
}
