// Package deploy holds the files that run voicesvc outside a checkout (a
// container image, a compose file, a systemd unit); its tests check them.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// requireTool finds a command; CI must have it (scripts/deps.sh), a
// developer's machine may not.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required in CI: %v", name, err)
		}
		t.Skipf("%s not found; skipping outside CI", name)
	}
	return p
}

// TestInstallAndVerifyUnit: `make install` puts the binary, the unit and the
// README under PREFIX, the installed unit runs the installed binary, and
// systemd accepts the unit with every hardening option it carries.
func TestInstallAndVerifyUnit(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze")
	prefix := t.TempDir()
	cmd := exec.Command("make", "-s", "install", "PREFIX="+prefix)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	bin := filepath.Join(prefix, "bin", "voicesvc")
	unit := filepath.Join(prefix, "lib", "systemd", "system", "voicesvc.service")
	for path, mode := range map[string]os.FileMode{bin: 0o755, unit: 0o644,
		filepath.Join(prefix, "share", "doc", "voicesvc", "README.md"): 0o644} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != mode {
			t.Fatalf("%s: %v, mode %v, want %v", path, err, st, mode)
		}
	}
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.Contains(text, "ExecStart="+bin+" serve") {
		t.Fatalf("installed unit does not run %s:\n%s", bin, text)
	}
	for _, opt := range []string{"DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes",
		"StateDirectory=voicesvc", "LimitNOFILE="} {
		if !strings.Contains(text, opt) {
			t.Errorf("unit lacks %s", opt)
		}
	}
	if out, err := exec.Command(analyze, "verify", unit).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "serve", "--help").CombinedOutput(); err != nil {
		t.Fatalf("installed binary: %v\n%s", err, out)
	}
}

// TestDockerfileRuntime: the image's runtime stage installs a package for
// every library the binary links dynamically (what ldd lists from
// /lib or /usr/lib, glibc aside), so the image starts. The image itself
// needs a Docker engine to build, which CI does not run.
func TestDockerfileRuntime(t *testing.T) {
	requireTool(t, "ldd")
	dpkg := requireTool(t, "dpkg")
	bin := filepath.Join(t.TempDir(), "voicesvc")
	build := exec.Command("go", "build", "-o", bin, "../cmd/voicesvc")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	runtime := string(df[strings.LastIndex(string(df), "FROM "):])
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	// Direct dependencies only: the packages' own dependencies come with them.
	direct, _ := exec.Command("sh", "-c", "objdump -p "+bin+" | awk '/NEEDED/{print $2}'").Output()
	needed := strings.Fields(string(direct))
	if len(needed) == 0 {
		t.Fatalf("no NEEDED entries found in %s (ldd: %s)", bin, out)
	}
	for _, lib := range needed {
		if strings.HasPrefix(lib, "libc.so") || strings.HasPrefix(lib, "libm.so") || strings.HasPrefix(lib, "ld-linux") {
			continue // glibc, in every Debian image
		}
		path := ""
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == lib {
				path = f[2]
			}
		}
		owner, err := exec.Command(dpkg, "-S", path).Output()
		if err != nil && strings.HasPrefix(path, "/lib/") { // merged /usr: dpkg knows one spelling
			owner, err = exec.Command(dpkg, "-S", "/usr"+path).Output()
		}
		if path == "" || err != nil {
			t.Fatalf("%s (%s): no Debian package owns it: %v", lib, path, err)
		}
		pkg := strings.SplitN(strings.TrimSpace(string(owner)), ":", 2)[0]
		if !strings.Contains(runtime, " "+pkg+" ") && !strings.Contains(runtime, " "+pkg+"\n") {
			t.Errorf("%s comes from %s, which the Dockerfile's runtime stage does not install", lib, pkg)
		}
	}
	if !strings.Contains(runtime, "espeak-ng-data") || !strings.Contains(runtime, "HEALTHCHECK") ||
		!strings.Contains(runtime, "USER voicesvc") {
		t.Errorf("runtime stage lacks espeak-ng-data, the health check or the non-root user")
	}
}

// TestComposeBuildsOnce: of the compose file's voicesvc services, one
// builds the image and the others run that same image without building or
// pulling it (merge keys resolved, as compose reads them).
func TestComposeBuildsOnce(t *testing.T) {
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Image      string         `yaml:"image"`
			Build      map[string]any `yaml:"build"`
			PullPolicy string         `yaml:"pull_policy"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var builders, runners []string
	image := ""
	for name, s := range f.Services {
		if !strings.HasPrefix(name, "voicesvc") {
			continue
		}
		if s.Build != nil {
			builders = append(builders, name)
			image = s.Image
		} else {
			runners = append(runners, name)
		}
	}
	if len(builders) != 1 || image == "" {
		t.Fatalf("services that build the image: %v (image %q), want one that names its image", builders, image)
	}
	if len(runners) == 0 {
		t.Fatalf("no second voicesvc service")
	}
	for _, name := range runners {
		s := f.Services[name]
		if s.Image != image || s.PullPolicy != "never" {
			t.Errorf("%s: image %q, pull_policy %q; want %s's image %q, pull_policy never", name, s.Image, s.PullPolicy, builders[0], image)
		}
	}
}

// TestBuildEmbedsEspeakLayout: make build and the image's build stage both
// write the espeak history layout of the archive they link before building
// the binary, which embeds it (the runtime stage has no libespeak-ng.a).
func TestBuildEmbedsEspeakLayout(t *testing.T) {
	for _, f := range []struct{ file, build string }{
		{"Dockerfile", "go build -trimpath"},
		{"../Makefile", "$(GO) build -o $(BIN)"},
	} {
		b, err := os.ReadFile(f.file)
		if err != nil {
			t.Fatal(err)
		}
		layout, build := strings.Index(string(b), "go run ./cmd/espeak-layout"), strings.Index(string(b), f.build)
		if f.file == "../Makefile" {
			layout = strings.Index(string(b), "$(GO) run ./cmd/espeak-layout")
		}
		if layout < 0 || build < 0 || layout > build {
			t.Errorf("%s: espeak-layout at %d, the build at %d: want the layout written before the build", f.file, layout, build)
		}
	}
}
