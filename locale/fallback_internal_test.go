package locale

import (
	"testing"

	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// A message the Chinese catalog lacks falls back to the English text, never
// to its id, and the localizer reports it (the master logs it).
func TestMissingChineseMessageFallsBackToEnglish(t *testing.T) {
	b := i18n.NewBundle(language.English)
	b.MustAddMessages(language.English, &i18n.Message{ID: "OnlyInEnglish", Other: "Hello {{.Name}}"})
	b.MustAddMessages(language.SimplifiedChinese, &i18n.Message{ID: "Other", Other: "别的"})
	var reported []string
	l := &Localizer{lang: ZH, l: i18n.NewLocalizer(b, ZH), missing: func(lang, id string) { reported = append(reported, lang+":"+id) }}
	if got := l.T("OnlyInEnglish", "Name", "ada"); got != "Hello ada" {
		t.Fatalf("fallback renders %q", got)
	}
	if len(reported) != 1 || reported[0] != "zh-CN:OnlyInEnglish" {
		t.Fatalf("reported %v", reported)
	}
}
