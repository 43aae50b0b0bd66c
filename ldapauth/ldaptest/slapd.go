// Package ldaptest starts a real OpenLDAP server (slapd) for tests, with its
// own configuration, database and self-signed certificate in a temp dir.
package ldaptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// The directory's fixed names and passwords.
const (
	Suffix     = "dc=example,dc=com"
	People     = "ou=people," + Suffix
	Groups     = "ou=groups," + Suffix
	BindDN     = "cn=svc," + Suffix
	BindPW     = "svc-secret-pw"
	AdminGroup = "cn=sm-admins," + Groups
	ViewGroup  = "cn=sm-viewers," + Groups
	OtherGroup = "cn=billing," + Groups
	// Password is every test user's password.
	Password = "ldap-user-pw-1"
)

// Slapd is a running slapd.
type Slapd struct {
	URL, LDAPSURL string // ldap://127.0.0.1:port, ldaps://127.0.0.1:port
	CAFile        string // PEM of the self-signed server certificate
	cmd           *exec.Cmd
	done          chan struct{}
}

// binary finds slapd, which Debian installs in /usr/sbin.
func binary(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/sbin/" + name; fileExists(p) {
		return p
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Start starts slapd with users alice (admin group), bob (viewer group),
// carol (only the billing group), admin (admin group: the name of the local
// first user) and the service account, all with Password; it skips the test when slapd is absent
// (fails under SM_TEST_REQUIRE_ALL=1). The server stops with the test.
func Start(t testing.TB) *Slapd {
	t.Helper()
	slapd, slapadd := binary("slapd"), binary("slapadd")
	if slapd == "" || slapadd == "" || !fileExists("/etc/ldap/schema/inetorgperson.schema") {
		storetest.SkipOrFail(t, "slapd is not installed (apt-get install slapd ldap-utils)")
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile)
	if err := os.Mkdir(filepath.Join(dir, "db"), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
pidfile %[1]s/slapd.pid
TLSCertificateFile %[2]s
TLSCertificateKeyFile %[3]s
database mdb
maxsize 10485760
suffix "%[4]s"
rootdn "cn=root,%[4]s"
rootpw root-secret
directory %[1]s/db
overlay memberof
`, dir, certFile, keyFile, Suffix)
	confFile := filepath.Join(dir, "slapd.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// slapadd bypasses overlays, so each user's memberOf is written by hand
	// to match the groups' members.
	user := func(uid string, groups ...string) string {
		s := fmt.Sprintf("dn: uid=%s,%s\nobjectClass: inetOrgPerson\nuid: %s\ncn: %s\nsn: %s\nmail: %s@example.com\nuserPassword: %s\n",
			uid, People, uid, uid, uid, uid, Password)
		for _, g := range groups {
			s += "memberOf: " + g + "\n"
		}
		return s + "\n"
	}
	group := func(dn string, members ...string) string {
		s := fmt.Sprintf("dn: %s\nobjectClass: groupOfNames\ncn: %s\n", dn, strings.TrimPrefix(strings.Split(dn, ",")[0], "cn="))
		for _, m := range members {
			s += "member: uid=" + m + "," + People + "\n"
		}
		return s + "\n"
	}
	ldif := fmt.Sprintf("dn: %s\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n", Suffix) +
		fmt.Sprintf("dn: %s\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: svc\nuserPassword: %s\n\n", BindDN, BindPW) +
		fmt.Sprintf("dn: %s\nobjectClass: organizationalUnit\nou: people\n\n", People) +
		fmt.Sprintf("dn: %s\nobjectClass: organizationalUnit\nou: groups\n\n", Groups) +
		user("alice", AdminGroup) + user("bob", ViewGroup) + user("carol", OtherGroup) + user("admin", AdminGroup) +
		group(AdminGroup, "alice", "admin") + group(ViewGroup, "bob") + group(OtherGroup, "carol")
	ldifFile := filepath.Join(dir, "data.ldif")
	if err := os.WriteFile(ldifFile, []byte(ldif), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(slapadd, "-f", confFile, "-l", ldifFile).CombinedOutput(); err != nil {
		t.Fatalf("slapadd: %v\n%s", err, out)
	}
	port, sport := freePort(t), freePort(t)
	s := &Slapd{
		URL:      fmt.Sprintf("ldap://127.0.0.1:%d", port),
		LDAPSURL: fmt.Sprintf("ldaps://127.0.0.1:%d", sport),
		CAFile:   certFile,
		done:     make(chan struct{}),
	}
	// -d keeps slapd in the foreground, so the test owns the process.
	s.cmd = exec.Command(slapd, "-f", confFile, "-h", s.URL+"/ "+s.LDAPSURL+"/", "-d", "0")
	logFile, err := os.Create(filepath.Join(dir, "slapd.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start slapd: %v", err)
	}
	go func() { _ = s.cmd.Wait(); logFile.Close(); close(s.done) }()
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-s.done:
			out, _ := os.ReadFile(filepath.Join(dir, "slapd.log"))
			t.Fatalf("slapd exited: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("slapd did not listen on %s in 15s", s.URL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// Stop ends slapd and waits for it; later calls do nothing.
func (s *Slapd) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t testing.TB, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}
