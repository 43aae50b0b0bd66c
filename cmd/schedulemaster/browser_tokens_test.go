package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// bearerStatus calls the open API with a bearer token and returns the status.
func bearerStatus(t *testing.T, m *masterProc, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", m.URL+"/api/v1/nodes", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestBrowserAPITokenCreateUseRevoke(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	b := newBrowser(t, chromium)
	b.logIn(m, "", "dash-live")
	b.do("open the tokens page", 20*time.Second,
		chromedp.Navigate(m.URL+"/tokens"),
		chromedp.WaitVisible(chromedp.ID("token-name")),
	)
	// An empty name is refused inline.
	b.do("create without a name", 20*time.Second,
		chromedp.Evaluate[chromedp.Void](`document.getElementById("token-name").removeAttribute("required")`),
		chromedp.Click(chromedp.ID("create-token")),
		chromedp.WaitVisible(chromedp.ID("error-name")),
	)
	b.do("create a token", 20*time.Second,
		sendKeys(chromedp.ID("token-name"), "ci-pipeline"),
		chromedp.Click(chromedp.ID("create-token")),
		chromedp.WaitVisible(chromedp.ID("new-token")),
	)
	token := strings.TrimSpace(b.wait("the new token, shown once", 10*time.Second, textJS("#new-token"), contains("smt_")))
	if got := bearerStatus(t, m, token); got != http.StatusOK {
		t.Fatalf("the new token: %d, want 200", got)
	}
	// Shown once: a reload of the list does not show it again, but lists it with its last use.
	b.do("reload the tokens page", 20*time.Second, chromedp.Navigate(m.URL+"/tokens"), chromedp.WaitVisible(chromedp.ID("token-name")))
	b.wait("token not shown again", 5*time.Second, existsJS("#new-token"), equals("false"))
	b.wait("token listed with its last use", 10*time.Second, `document.body.innerText`, func(s string) bool {
		return strings.Contains(s, "ci-pipeline") && (strings.Contains(s, "ago") || strings.Contains(s, "just now"))
	})
	if strings.Contains(b.wait("page text", 5*time.Second, `document.body.innerHTML`, nonEmpty), token) {
		t.Fatal("the token is in the page after creation")
	}
	b.do("revoke it", 20*time.Second,
		chromedp.Click(`form[action$="/revoke"] button`),
		chromedp.WaitReady("body"),
	)
	b.wait("revoked", 10*time.Second, `document.body.innerText`, contains("revoked"))
	if got := bearerStatus(t, m, token); got != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %d, want 401", got)
	}
	b.checkConsole()
}
