package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// podmanFlags run podman as this machine allows: vfs storage (no overlay in
// the sandbox), runc, and cgroupfs (no systemd).
var podmanFlags = []string{"--storage-driver", "vfs", "--runtime", "runc", "--cgroup-manager", "cgroupfs"}

func podmanArgs(args ...string) []string { return append(append([]string{}, podmanFlags...), args...) }

// TestImageServesReady builds the runtime image the air-gapped way (the
// binary and files prepared on the host by deploy/image/prebuilt.sh, the
// Dockerfile's runtime stage FROM scratch), runs a master in it as the
// non-root user with its SQLite database in the volume, and checks that it
// answers /ready and /health.
func TestImageServesReady(t *testing.T) {
	t.Parallel()
	podman := needTool(t, "podman", "builds and runs the image")
	needTool(t, "runc", "podman's runtime here")
	root := repoRoot(t)

	// The build context holds only what the prebuilt stage copies: a small
	// context keeps vfs storage fast, and no other test's files are in it.
	buildCtx := t.TempDir()
	start := time.Now()
	// A fixed date (and commit) keeps the binary the same between runs, so
	// the layers of an earlier run are reused.
	runCmd(t, 15*time.Minute, []string{"DATE=2026-01-01T00:00:00Z", "VERSION=0.0.0-imagetest"},
		"sh", filepath.Join(root, "deploy/image/prebuilt.sh"), buildCtx)
	binTook := time.Since(start)
	bin := filepath.Join(buildCtx, "dist/image/rootfs/usr/local/bin/schedulemaster")
	if out, err := exec.Command("file", bin).Output(); err == nil && !strings.Contains(string(out), "statically linked") {
		t.Errorf("the binary is not static: %s", out)
	}

	tag := "localhost/" + uniqueName("schedulemaster-imagetest") + ":test"
	start = time.Now()
	build := exec.Command(podman, podmanArgs("build", "--format", "docker", // docker: OCI images have no HEALTHCHECK
		"--build-arg", "BINARY=prebuilt", "-f", filepath.Join(root, "Dockerfile"), "-t", tag, buildCtx)...)
	outb, err := build.CombinedOutput() // the steps are on stderr
	out := string(outb)
	if err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	buildTook := time.Since(start)
	// The prebuilt stage is an image of its own, untagged: remove it too
	// (not forced: a build running beside this one may be using it).
	stage := regexp.MustCompile(`(?m)COPY dist/image/rootfs/ /rootfs/\n(?:.*\n)*?--> (?:Using cache )?([0-9a-f]{8,64})`).FindStringSubmatch(out)
	if stage == nil {
		t.Logf("the prebuilt stage's image id is not in the build output: it is left in the storage\n%s", out)
	}
	t.Cleanup(func() {
		if o, err := tryCmd(time.Minute, nil, podman, podmanArgs("rmi", tag)...); err != nil {
			t.Logf("podman rmi %s: %v %s", tag, err, o)
		}
		if stage != nil {
			if o, err := tryCmd(time.Minute, nil, podman, podmanArgs("rmi", stage[1])...); err != nil {
				t.Logf("podman rmi %s (the prebuilt stage): %v %s", stage[1], err, o)
			}
		}
	})

	var img []struct {
		Size        int64
		Healthcheck struct{ Test []string }
		Config      struct {
			User         string
			Entrypoint   []string
			Cmd          []string
			ExposedPorts map[string]any
			Volumes      map[string]any
		}
	}
	if err := json.Unmarshal([]byte(runCmd(t, time.Minute, nil, podman, podmanArgs("image", "inspect", tag)...)), &img); err != nil || len(img) != 1 {
		t.Fatalf("podman image inspect: %v %d", err, len(img))
	}
	c := img[0].Config
	t.Logf("binary built in %v; image built in %v; image size %.1f MB", binTook.Round(time.Millisecond), buildTook.Round(time.Millisecond), float64(img[0].Size)/1e6)
	if c.User != "65532:65532" {
		t.Errorf("image user = %q, want 65532:65532 (non-root)", c.User)
	}
	if strings.Join(c.Entrypoint, " ") != "schedulemaster" || strings.Join(c.Cmd, " ") != "master" {
		t.Errorf("entrypoint %q cmd %q, want schedulemaster master", c.Entrypoint, c.Cmd)
	}
	if _, ok := c.ExposedPorts["30000/tcp"]; !ok {
		t.Errorf("exposed ports %v lack 30000/tcp", c.ExposedPorts)
	}
	if _, ok := c.Volumes["/var/lib/schedulemaster"]; !ok {
		t.Errorf("volumes %v lack /var/lib/schedulemaster", c.Volumes)
	}
	if got := strings.Join(img[0].Healthcheck.Test, " "); got != "CMD /usr/local/bin/schedulemaster healthcheck" {
		t.Errorf("healthcheck %q", got)
	}
	if img[0].Size > 80e6 {
		t.Errorf("image is %d bytes: more than the binary and a CA bundle should take", img[0].Size)
	}

	// The entrypoint answers a command without a master.
	if v := runCmd(t, time.Minute, nil, podman, podmanArgs("run", "--rm", "--network", "host",
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096", tag, "version")...); !strings.HasPrefix(v, "schedulemaster ") {
		t.Errorf("version in the container: %q", v)
	}

	port := freePort(t)
	name := uniqueName("sm-imagetest")
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	start = time.Now()
	// SM_LISTEN rather than --listen: `schedulemaster healthcheck` reads it
	// for the local URL, as in a real deployment.
	runCmd(t, time.Minute, nil, podman, podmanArgs("run", "-d", "--name", name, "--network", "host",
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
		"-e", "SM_LISTEN=127.0.0.1:"+strconv.Itoa(port), "-e", "SM_ADMIN_PASSWORD=image-test-password-1",
		"-e", "SM_CLUSTER_KEY="+imageTestKey, tag)...)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := tryCmd(time.Minute, nil, podman, podmanArgs("logs", name)...)
			t.Logf("container logs:\n%s", logs)
		}
		if o, err := tryCmd(time.Minute, nil, podman, podmanArgs("rm", "-f", "-v", name)...); err != nil {
			t.Logf("podman rm %s: %v %s", name, err, o)
		}
	})

	var ready map[string]any
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, body := get(base + "/ready")
		if code == http.StatusOK {
			if err := json.Unmarshal(body, &ready); err != nil {
				t.Fatalf("/ready body %q: %v", body, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ready did not answer 200 within 90s (last: %d %s)", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("container ready in %v", time.Since(start).Round(time.Millisecond))
	if ready["ready"] != true {
		t.Errorf("/ready = %v", ready)
	}
	code, body := get(base + "/health")
	var health map[string]any
	if code != http.StatusOK || json.Unmarshal(body, &health) != nil || health["node"] != "master" {
		t.Errorf("/health = %d %s", code, body)
	}

	// The database is in the volume, written by the non-root user.
	mount := strings.TrimSpace(runCmd(t, time.Minute, nil, podman, podmanArgs("inspect", "--format",
		`{{range .Mounts}}{{if eq .Destination "/var/lib/schedulemaster"}}{{.Source}}{{end}}{{end}}`, name)...))
	if mount == "" {
		t.Error("no volume at /var/lib/schedulemaster")
	} else if fi, err := os.Stat(filepath.Join(mount, "schedulemaster.db")); err != nil {
		t.Errorf("the SQLite database is not in the volume: %v", err)
	} else if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 65532 {
		t.Errorf("schedulemaster.db is owned by uid %d, want 65532", st.Uid)
	}

	t.Run("worker-shell", func(t *testing.T) { checkWorkerShell(t, podman, root, buildCtx, name, base) })

	// The image's HEALTHCHECK once the binary has the healthcheck command
	// (it reads SM_LISTEN for the local /ready).
	if help, _ := exec.Command(bin, "help").Output(); strings.Contains(string(help), "healthcheck") {
		hc, err := tryCmd(time.Minute, nil, podman, podmanArgs("healthcheck", "run", name)...)
		if err != nil || !strings.Contains(hc, "healthy") {
			t.Errorf("podman healthcheck run: %v %q", err, hc)
		}
	} else {
		t.Log("this binary has no healthcheck command yet: the image's HEALTHCHECK is not run")
	}
}

const imageTestKey = "image-test-cluster-key-0123456789"

// checkWorkerShell builds the worker-shell target on a local base image made
// of the host's static busybox (no registry to pull a distribution from),
// runs a worker of pool imagetest in it against the master container, and
// checks that the worker has a shell and its user, answers /health with its
// label, and that the master lists it running.
func checkWorkerShell(t *testing.T, podman, root, buildCtx, master, masterURL string) {
	bb, err := exec.LookPath("busybox")
	if err == nil {
		if out, _ := exec.Command("file", "-L", bb).Output(); !strings.Contains(string(out), "statically linked") {
			err = fmt.Errorf("%s is not static", bb)
		}
	}
	if err != nil {
		storetest.SkipOrFail(t, fmt.Sprintf("no static busybox for a local worker-shell base (apt-get install busybox-static): %v", err))
	}
	// The base: busybox and its sh, passwd and group with root only.
	base := t.TempDir()
	for _, d := range []string{"bin", "etc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runCmd(t, time.Minute, nil, "cp", bb, filepath.Join(base, "bin/busybox"))
	for _, c := range []string{"sh", "id", "mkdir", "chown", "echo", "cat"} {
		if err := os.Symlink("busybox", filepath.Join(base, "bin", c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "etc/group"), []byte("root:x:0:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(t.TempDir(), "base.tar")
	runCmd(t, time.Minute, nil, "tar", "-C", base, "-cf", tarball, ".")
	baseTag := "localhost/" + uniqueName("schedulemaster-imagetest-base") + ":test"
	runCmd(t, time.Minute, nil, podman, podmanArgs("import", "-q", tarball, baseTag)...)
	t.Cleanup(func() { _, _ = tryCmd(time.Minute, nil, podman, podmanArgs("rmi", baseTag)...) })

	tag := "localhost/" + uniqueName("schedulemaster-imagetest-worker") + ":test"
	start := time.Now()
	runCmd(t, 10*time.Minute, nil, podman, podmanArgs("build", "--format", "docker", "--target", "worker-shell",
		"--build-arg", "BINARY=prebuilt", "--build-arg", "SHELL_IMAGE="+baseTag,
		"-f", filepath.Join(root, "Dockerfile"), "-t", tag, buildCtx)...)
	t.Logf("worker-shell image built in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if o, err := tryCmd(time.Minute, nil, podman, podmanArgs("rmi", tag)...); err != nil {
			t.Logf("podman rmi %s: %v %s", tag, err, o)
		}
	})
	run := podmanArgs("run", "--rm", "--network", "host", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096")
	if id := runCmd(t, time.Minute, nil, podman, append(run, "--entrypoint", "/bin/sh", tag, "-c", "id -un; id -u")...); id != "schedulemaster\n65532\n" {
		t.Errorf("worker-shell user: %q, want schedulemaster 65532", id)
	}

	port := freePort(t)
	name := uniqueName("sm-imagetest-worker")
	identity := fmt.Sprintf("imagetest-%d", port)
	runCmd(t, time.Minute, nil, podman, podmanArgs("run", "-d", "--name", name, "--network", "host",
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
		"-e", "SM_MASTER="+masterURL, "-e", "SM_CLUSTER_KEY="+imageTestKey, "-e", "SM_IDENTITY="+identity,
		"-e", "SM_IP=127.0.0.1", "-e", "SM_PORT="+strconv.Itoa(port), "-e", "SM_ALLOW_SHELL=true",
		tag, "worker", "--labels", "pool=imagetest")...)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := tryCmd(time.Minute, nil, podman, podmanArgs("logs", name)...)
			t.Logf("worker container logs:\n%s", logs)
		}
		_, _ = tryCmd(time.Minute, nil, podman, podmanArgs("rm", "-f", "-v", name)...)
	})
	wurl := "http://127.0.0.1:" + strconv.Itoa(port) + "/health"
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := get(wurl)
		if code == http.StatusOK && strings.Contains(string(body), `"pool":"imagetest"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker /health: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The master lists the worker running (an API token made in the master's container).
	token := strings.TrimSpace(runCmd(t, time.Minute, nil, podman, podmanArgs("exec", master, "schedulemaster", "token", "create", "--name", "imagetest", "--user", "admin")...))
	deadline = time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest("GET", masterURL+"/api/v1/nodes", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		var nodes []struct {
			Name   string
			Status int
			Labels map[string]string
		}
		resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&nodes)
			resp.Body.Close()
		}
		found := false
		for _, n := range nodes {
			if n.Name == identity && n.Status == int(store.StatusRunning) && n.Labels["pool"] == "imagetest" {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the master does not list %s running with pool imagetest: %v %+v", identity, err, nodes)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// get answers the status and body of a GET, 0 when it failed.
func get(url string) (int, []byte) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, []byte(fmt.Sprint(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}
