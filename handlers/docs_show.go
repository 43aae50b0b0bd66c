package handlers

import (
	"errors"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// manualPageRE is the name of a page of the manual as /docs/<name> takes it:
// a file name without .md ("tasks", "glossary.zh-CN"), or a generated page
// under reference/. Nothing else gets near the files: no slash but
// reference's, no "..", no empty part.
var manualPageRE = regexp.MustCompile(`^(reference/)?[A-Za-z0-9]+(?:[.-][A-Za-z0-9]+)*$`)

// manualPages renders the manual's pages on their first read and keeps
// them: they are embedded in the binary, so they never change while the
// process lives.
type manualPages struct {
	files fs.FS
	mu    sync.Mutex
	pages map[string]views.Manual // by file, "tasks.md" or "zh-CN/tasks.md"
}

func newManualPages(files fs.FS) *manualPages {
	return &manualPages{files: files, pages: map[string]views.Manual{}}
}

// page returns the page name in lang (the Chinese file where there is one,
// else the English) and the language it is in; false when the manual has no
// such page.
func (m *manualPages) page(lang, name string) (views.Manual, string, bool, error) {
	if !manualPageRE.MatchString(name) {
		return views.Manual{}, "", false, nil
	}
	file, fileLang := name+".md", locale.EN
	if lang == locale.ZH {
		if _, err := fs.Stat(m.files, "zh-CN/"+file); err == nil {
			file, fileLang = "zh-CN/"+file, locale.ZH
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pages[file]; ok {
		return p, fileLang, true, nil
	}
	src, err := fs.ReadFile(m.files, file)
	if errors.Is(err, fs.ErrNotExist) {
		return views.Manual{}, "", false, nil
	}
	if err != nil {
		return views.Manual{}, "", false, err
	}
	p, err := views.ManualHTML(file, src)
	if err != nil {
		return views.Manual{}, "", false, err
	}
	m.pages[file] = p
	return p, fileLang, true, nil
}

// showDocs serves the manual: GET /docs is its index (docs/README.md),
// /docs/<page> a page (docs/<page>.md), in the reader's language where the
// page is translated. Any other name is the console's 404.
func (s *server) showDocs(c *gin.Context) {
	name := strings.TrimPrefix(c.Param("page"), "/")
	if name == "" {
		name = "README"
	}
	page, lang, ok, err := s.manual.page(lc(c).Lang(), name)
	switch {
	case err != nil:
		s.serverError(c, err)
	case !ok:
		s.notFound(c)
	default:
		s.render(c, http.StatusOK, views.DocsPage(views.DocsVM{Layout: s.layout(c, page.Title, "docs"), Page: page, Lang: lang}))
	}
}
