package locale_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/locale"
)

// Both catalogs hold the same message ids: a message missing from one would
// show in English (or not at all) to its readers.
func TestCatalogsHaveTheSameKeys(t *testing.T) {
	en, err := locale.IDs(locale.EN)
	if err != nil {
		t.Fatal(err)
	}
	zh, err := locale.IDs(locale.ZH)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range en {
		if !slices.Contains(zh, id) {
			t.Errorf("zh-CN lacks %s", id)
		}
	}
	for _, id := range zh {
		if !slices.Contains(en, id) {
			t.Errorf("en lacks %s", id)
		}
	}
	t.Logf("%d messages in each catalog", len(en))
}

var quotedID = regexp.MustCompile(`"([A-Z][A-Za-z0-9]+)"`)

// Every message is used: its id appears as a string in the console's
// sources (templates, handlers, the engine's notifications, this package).
func TestEveryMessageIsUsed(t *testing.T) {
	used := map[string]bool{}
	for _, dir := range []string{"../views", "../handlers", "../master", "."} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			if !(strings.HasSuffix(f, ".templ") || strings.HasSuffix(f, ".go")) || strings.HasSuffix(f, "_templ.go") ||
				strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range quotedID.FindAllStringSubmatch(string(b), -1) {
				used[m[1]] = true
			}
		}
	}
	ids, _ := locale.IDs(locale.EN)
	for _, id := range ids {
		if !used[id] {
			t.Errorf("message %s is in the catalogs but no source names it", id)
		}
	}
}

var placeholder = regexp.MustCompile(`\{\{\s*\.([A-Za-z][A-Za-z0-9]*)\s*\}\}`)

// Every message renders with its placeholders filled, in both languages and
// every plural form; the Chinese text uses the same placeholders as the
// English one, so no value is lost in translation.
func TestNoMessageHasUnfilledPlaceholders(t *testing.T) {
	ids, _ := locale.IDs(locale.EN)
	var missing []string
	localizers := map[string]*locale.Localizer{}
	for _, lang := range locale.Languages() {
		localizers[lang] = locale.New(lang, func(_, id string) { missing = append(missing, id) })
	}
	for _, id := range ids {
		names := map[string][]string{}
		for _, lang := range locale.Languages() {
			forms, err := locale.Forms(lang, id)
			if err != nil {
				t.Fatal(err)
			}
			set := map[string]bool{}
			for _, text := range forms {
				for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
					set[m[1]] = true
				}
			}
			for n := range set {
				names[lang] = append(names[lang], n)
			}
			slices.Sort(names[lang])
		}
		if !slices.Equal(names[locale.EN], names[locale.ZH]) {
			t.Errorf("%s: en uses %v, zh-CN uses %v", id, names[locale.EN], names[locale.ZH])
		}
		enForms, _ := locale.Forms(locale.EN, id)
		_, plural := enForms["one"]
		var kv []any
		for _, n := range names[locale.EN] {
			if n != "Count" || !plural {
				kv = append(kv, n, "‹"+n+"›")
			}
		}
		for _, lang := range locale.Languages() {
			missing = nil
			l := localizers[lang]
			for _, count := range []int{1, 2} {
				var out string
				if plural {
					out = l.N(id, count, kv...)
				} else {
					out = l.T(id, kv...)
				}
				if out == "" && id != "ListSep" || strings.Contains(out, "{{") || strings.Contains(out, "<no value>") {
					t.Errorf("%s in %s renders %q", id, lang, out)
				}
			}
			if len(missing) > 0 {
				t.Errorf("%s in %s reported missing", id, lang)
			}
		}
	}
}

// A message id no catalog has renders nothing (never the id) and is
// reported; the default language is English.
func TestUnknownMessageIsReportedNotShown(t *testing.T) {
	var got []string
	l := locale.New(locale.ZH, func(lang, id string) { got = append(got, lang+":"+id) })
	if out := l.T("NoSuchMessageAnywhere"); out != "" {
		t.Fatalf("an unknown message renders %q", out)
	}
	if !slices.Equal(got, []string{"zh-CN:NoSuchMessageAnywhere"}) {
		t.Fatalf("reported %v", got)
	}
	if locale.New("fr", nil).Lang() != locale.EN {
		t.Fatal("an unknown language is not English")
	}
}

// The language is the user's, else the cookie's, else the browser's best
// match (any Chinese reads Simplified Chinese), else English.
func TestNegotiateOrder(t *testing.T) {
	for _, tc := range []struct{ pref, cookie, accept, want string }{
		{"", "", "", "en"},
		{"", "", "zh-CN,zh;q=0.9", "zh-CN"},
		{"", "", "zh-TW", "zh-CN"},
		{"", "", "fr-FR,de;q=0.8", "en"},
		{"", "", "de, zh;q=0.5", "zh-CN"},
		{"", "en", "zh-CN", "en"},
		{"", "zh-CN", "en-US", "zh-CN"},
		{"en", "zh-CN", "zh-CN", "en"},
		{"zh-CN", "en", "en", "zh-CN"},
		{"", "fr", "garbage;;q=", "en"},
	} {
		if got := locale.Negotiate(tc.pref, tc.cookie, tc.accept); got != tc.want {
			t.Errorf("Negotiate(%q, %q, %q) = %s, want %s", tc.pref, tc.cookie, tc.accept, got, tc.want)
		}
	}
}

// Relative times, durations and plurals follow the language.
func TestTimesAndPluralsFollowTheLanguage(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	en, zh := locale.New(locale.EN, nil), locale.New(locale.ZH, nil)
	for _, tc := range []struct{ got, want string }{
		{en.Ago(now.Add(-3*time.Minute), now), "3m ago"},
		{zh.Ago(now.Add(-3*time.Minute), now), "3 分钟前"},
		{zh.Ago(now.Add(-5*time.Second), now), "5 秒前"},
		{zh.Until(now.Add(2*time.Hour), now), "2 小时后"},
		{en.Until(now.Add(2*time.Hour), now), "in 2h"},
		{zh.Ago(time.Time{}, now), "从未"},
		{en.Duration(90 * time.Second), "1m30s"},
		{zh.Duration(90 * time.Second), "1 分 30 秒"},
		{zh.Duration(2 * time.Hour), "2 小时"},
		{en.N("NodeMasterCount", 1), "1 master"},
		{en.N("NodeMasterCount", 2), "2 masters"},
		{zh.N("NodeMasterCount", 2), "2 个主节点"},
		{zh.Weekday(time.Monday), "周一"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
