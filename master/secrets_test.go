package master

import (
	"testing"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// TestMaskTaskDefAndKeep: masking copies (the stored definition keeps its
// values), and sending the masked copy back restores every secret.
func TestMaskTaskDefAndKeep(t *testing.T) {
	t.Parallel()
	stored := protocol.TaskDef{
		Params:       map[string]string{"TOKEN": "p-secret", "MODE": "fast"},
		SecretParams: []string{"TOKEN"},
		HTTP: &protocol.HTTPSpec{URL: "https://bob:u%40secret@example.com/x?q=1",
			Headers:       map[string]string{"authorization": "Bearer h-secret", "X-Token": "t-secret", "X-Plain": "plain"},
			SecretHeaders: []string{"x-token"}},
	}
	m := MaskTaskDef(stored)
	if m.Params["TOKEN"] != protocol.SecretMask || m.Params["MODE"] != "fast" ||
		m.HTTP.Headers["authorization"] != protocol.SecretMask || m.HTTP.Headers["X-Token"] != protocol.SecretMask ||
		m.HTTP.Headers["X-Plain"] != "plain" || m.HTTP.URL != "https://bob:"+protocol.SecretMask+"@example.com/x?q=1" {
		t.Fatalf("masked: %+v %+v", m, m.HTTP)
	}
	if stored.Params["TOKEN"] != "p-secret" || stored.HTTP.Headers["authorization"] != "Bearer h-secret" {
		t.Fatal("masking changed the stored definition")
	}
	KeepMaskedSecrets(&m, &stored)
	if m.Params["TOKEN"] != "p-secret" || m.HTTP.Headers["authorization"] != "Bearer h-secret" ||
		m.HTTP.Headers["X-Token"] != "t-secret" || m.HTTP.URL != stored.HTTP.URL {
		t.Fatalf("kept: %+v %+v", m, m.HTTP)
	}
	// Another user in the URL does not inherit the password.
	other := MaskTaskDef(stored)
	other.HTTP.URL = "https://eve:" + protocol.SecretMask + "@example.com/x"
	KeepMaskedSecrets(&other, &stored)
	if other.HTTP.URL != "https://eve:"+protocol.SecretMask+"@example.com/x" {
		t.Fatalf("another user got the password: %s", other.HTTP.URL)
	}
	if MaskURL("http://example.com/a") != "http://example.com/a" || MaskURL("http://bob@example.com/") != "http://bob@example.com/" {
		t.Fatal("URLs without a password changed")
	}
}
