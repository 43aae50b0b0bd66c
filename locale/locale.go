// Package locale holds the console's message catalogs (English and
// Simplified Chinese, embedded in the binary) and picks a reader's language.
// The views and the engine's notifications both use it; it knows nothing of
// HTTP or templates.
package locale

import (
	"context"
	"embed"
	"fmt"
	"sort"
	"sync"

	"github.com/BurntSushi/toml"
	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// The languages of the console. EN is the default.
const (
	EN = "en"
	ZH = "zh-CN"
)

// CookieName is the cookie the language switch sets.
const CookieName = "sm_lang"

//go:embed active.*.toml
var catalogs embed.FS

// Languages are the console's languages, the default first.
func Languages() []string { return []string{EN, ZH} }

// ValidPreference reports whether pref may be stored as a user's language:
// "" (follow the browser) or one of Languages.
func ValidPreference(pref string) bool { return pref == "" || pref == EN || pref == ZH }

// bundle loads both catalogs once; a catalog that does not parse is a build
// error the tests catch, so it panics.
var bundle = sync.OnceValue(func() *i18n.Bundle {
	b := i18n.NewBundle(language.English)
	b.RegisterUnmarshalFunc("toml", toml.Unmarshal)
	for _, f := range []string{"active.en.toml", "active.zh-CN.toml"} {
		if _, err := b.LoadMessageFileFS(catalogs, f); err != nil {
			panic(fmt.Sprintf("locale: %s: %v", f, err))
		}
	}
	return b
})

// matcher picks a supported language from an Accept-Language list. Any
// Chinese (zh, zh-TW, zh-Hans) reads the Simplified catalog rather than
// falling back to English.
var matcher = sync.OnceValue(func() language.Matcher {
	return language.NewMatcher([]language.Tag{language.English, language.SimplifiedChinese})
})

// Negotiate returns the reader's language: the user's preference, else the
// switch's cookie, else the browser's Accept-Language, else English.
func Negotiate(pref, cookie, acceptLanguage string) string {
	for _, v := range []string{pref, cookie} {
		if v == EN || v == ZH {
			return v
		}
	}
	tags, _, err := language.ParseAcceptLanguage(acceptLanguage)
	if err != nil || len(tags) == 0 {
		return EN
	}
	_, i, conf := matcher().Match(tags...)
	if conf == language.No {
		return EN
	}
	if i == 1 {
		return ZH
	}
	return EN
}

// Localizer renders messages in one language. Missing reports a message id
// the language lacks (the English text is used instead); nil ignores it.
type Localizer struct {
	lang    string
	l       *i18n.Localizer
	missing func(lang, id string)
}

// New returns the localizer of lang (English for anything unknown).
func New(lang string, missing func(lang, id string)) *Localizer {
	if lang != ZH {
		lang = EN
	}
	return &Localizer{lang: lang, l: i18n.NewLocalizer(bundle(), lang), missing: missing}
}

// Lang is the localizer's language, "en" or "zh-CN": the value of <html lang>.
func (l *Localizer) Lang() string { return l.lang }

// Chinese reports whether the localizer speaks Chinese.
func (l *Localizer) Chinese() bool { return l.lang == ZH }

// T renders message id with data given as name/value pairs: T("X", "Name", n).
func (l *Localizer) T(id string, kv ...any) string {
	return l.localize(id, nil, kv)
}

// N renders the plural form of message id for count; the data holds Count.
func (l *Localizer) N(id string, count int, kv ...any) string {
	return l.localize(id, count, append(kv, "Count", count))
}

func (l *Localizer) localize(id string, count any, kv []any) string {
	var data map[string]any
	if len(kv) > 0 {
		data = make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			k, _ := kv[i].(string)
			data[k] = kv[i+1]
		}
	}
	s, err := l.l.Localize(&i18n.LocalizeConfig{MessageID: id, TemplateData: data, PluralCount: count})
	if err != nil {
		// A message the language lacks falls back to English (s holds it);
		// one no catalog has renders nothing rather than its id.
		if l.missing != nil {
			l.missing(l.lang, id)
		}
	}
	return s
}

type ctxKey struct{}

// With returns ctx carrying l.
func With(ctx context.Context, l *Localizer) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// From returns the localizer ctx carries, English if none.
func From(ctx context.Context) *Localizer {
	if ctx != nil {
		if l, ok := ctx.Value(ctxKey{}).(*Localizer); ok && l != nil {
			return l
		}
	}
	return New(EN, nil)
}

// IDs lists the message ids of lang's catalog, sorted: for the tests that
// keep the catalogs in step with each other and with the sources.
func IDs(lang string) ([]string, error) {
	m, err := rawCatalog(lang)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// Forms returns the plural forms (one, other) or the single text of message
// id in lang's catalog, keyed by form ("other" for a plain message).
func Forms(lang, id string) (map[string]string, error) {
	m, err := rawCatalog(lang)
	if err != nil {
		return nil, err
	}
	switch v := m[id].(type) {
	case string:
		return map[string]string{"other": v}, nil
	case map[string]any:
		out := map[string]string{}
		for k, s := range v {
			out[k], _ = s.(string)
		}
		return out, nil
	}
	return nil, fmt.Errorf("locale: %s has no message %s", lang, id)
}

// rawCatalog is lang's catalog as parsed TOML, read once.
func rawCatalog(lang string) (map[string]any, error) {
	switch lang {
	case EN:
		return rawEN()
	case ZH:
		return rawZH()
	}
	return nil, fmt.Errorf("locale: no catalog %s", lang)
}

var (
	rawEN = sync.OnceValues(func() (map[string]any, error) { return parseCatalog(EN) })
	rawZH = sync.OnceValues(func() (map[string]any, error) { return parseCatalog(ZH) })
)

func parseCatalog(lang string) (map[string]any, error) {
	name := "active." + lang + ".toml"
	b, err := catalogs.ReadFile(name)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := toml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("locale: %s: %w", name, err)
	}
	return m, nil
}
