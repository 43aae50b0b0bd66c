package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestApplyCommandLine: apply and export report every problem of their
// command line at once (exit 2), and print their flags on -h.
func TestApplyCommandLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		code    int
		wantOut string
		wantErr []string
	}{
		{"apply -h", []string{"apply", "-h"}, nil, exitOK, "--prune", nil},
		{"help export", []string{"help", "export"}, nil, exitOK, "where to write the document", nil},
		{"apply nothing", []string{"apply"}, nil, exitUsage, "", []string{"-f: is required", "want the master's URL", "SM_TOKEN: is not set"}},
		{"apply bad master", []string{"apply", "-f", "x.yaml", "--master", "ftp://m"}, map[string]string{"SM_TOKEN": "smt_x"}, exitUsage, "",
			[]string{"flag --master: want the master's URL"}},
		{"apply master from env", []string{"apply", "-f", "/nonexistent/x.yaml"}, map[string]string{"SM_TOKEN": "smt_x", "SM_MASTER": "http://127.0.0.1:1"},
			exitFailure, "", []string{"open /nonexistent/x.yaml"}},
		{"apply bad timeout", []string{"apply", "-f", "x", "--master", "http://m", "--timeout", "1ms"}, map[string]string{"SM_TOKEN": "smt_x"}, exitUsage, "",
			[]string{"--timeout"}},
		{"export unreachable", []string{"export", "--master", "http://127.0.0.1:1", "--timeout", "2s"}, map[string]string{"SM_TOKEN": "smt_x"},
			exitFailure, "", []string{"schedulemaster export: GET http://127.0.0.1:1/api/v1/export"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(tc.args, &out, &errOut, envMap(tc.env))
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.code, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantOut, out.String())
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
		})
	}
}
