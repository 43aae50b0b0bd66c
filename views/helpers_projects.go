package views

// tokenProject names a token's project: a cluster token has none.
func tokenProject(p string) string {
	if p == "" {
		return "(cluster)"
	}
	return p
}

// tokenRole names a token's role cap.
func tokenRole(r string) string {
	if r == "" {
		return "owner's"
	}
	return r
}
