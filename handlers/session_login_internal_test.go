package handlers

import "testing"

// TestSafeNext accepts only plain same-site paths.
func TestSafeNext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                     "/dashboard",
		"/tasks":               "/tasks",
		"/tasks/abc?offset=50": "/tasks/abc?offset=50",
		"/tasks?title=a%2Fb":   "/tasks?title=a%2Fb",
		"/\t/evil.example":     "/dashboard",
		"/\n/evil.example":     "/dashboard",
		"/\r/evil.example":     "/dashboard",
		"/\\/evil.example":     "/dashboard",
		"/\\evil.example":      "/dashboard",
		"/a\\b":                "/dashboard",
		"//evil":               "/dashboard",
		"///evil":              "/dashboard",
		"/%2F/evil":            "/dashboard",
		"/%2f/evil":            "/dashboard",
		"/%5C/evil":            "/dashboard",
		"https://evil":         "/dashboard",
		"evil.example":         "/dashboard",
		"javascript:alert(1)":  "/dashboard",
		"/ /evil":              "/dashboard",
		"/\x00":                "/dashboard",
		"/\xff":                "/dashboard",
		"/%zz":                 "/dashboard",
		"/users/bob%40x/edit":  "/users/bob%40x/edit",
		"/\u2028/evil.example": "/dashboard",
		"/\u00a0/evil.example": "/dashboard",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
