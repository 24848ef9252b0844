package main

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageRunsDemo builds the Dockerfile and runs `bot demo` in the
// image. It is slow and needs a container engine, so it runs only with
// IMAGE_TEST=1 (make image-test). Offline, IMAGE_LOCAL_BASES=1 builds the
// two base images from this machine instead of pulling them: the Go
// toolchain with the module cache (the build then downloads nothing), and
// an empty root with the distroless "nonroot" user. IMAGE_RUN_FLAGS adds
// flags to `run` (a VM without permission to raise rlimits needs e.g.
// "--ulimit nofile=1024:1024 --ulimit nproc=1024:1024"); IMAGE_ENGINE picks
// podman or docker.
func TestImageRunsDemo(t *testing.T) {
	if os.Getenv("IMAGE_TEST") == "" {
		t.Skip("set IMAGE_TEST=1 (make image-test)")
	}
	engine := os.Getenv("IMAGE_ENGINE")
	if engine == "" {
		for _, e := range []string{"podman", "docker"} {
			if _, err := exec.LookPath(e); err == nil {
				engine = e
				break
			}
		}
	}
	if engine == "" {
		t.Skip("no container engine (podman or docker)")
	}
	var global []string
	if rt := os.Getenv("IMAGE_RUNTIME"); rt != "" {
		global = append(global, "--runtime", rt)
	}
	sh := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(engine, append(append([]string(nil), global...), args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t.Logf("$ %s %s", engine, strings.Join(args, " "))
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", engine, strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	build := []string{"build", "--format", "docker", "-t", "localhost/agentbot:test", "--build-arg", "VERSION=image-test"}
	if engine == "docker" {
		build = []string{"build", "-t", "localhost/agentbot:test", "--build-arg", "VERSION=image-test"}
	}
	if os.Getenv("IMAGE_LOCAL_BASES") != "" {
		dir := t.TempDir()
		goroot := strings.TrimSpace(run1(t, "go", "env", "GOROOT"))
		modcache := strings.TrimSpace(run1(t, "go", "env", "GOMODCACHE"))
		builder := filepath.Join(dir, "builder.tar")
		writeTar(t, builder, map[string]string{"usr/local/go": goroot, "go/pkg/mod": modcache}, []string{"tmp", "src"}, nil)
		sh("import", "--change", "ENV=PATH=/usr/local/go/bin:/usr/bin:/bin", "--change", "ENV=GOMODCACHE=/go/pkg/mod",
			"--change", "ENV=GOPROXY=off", "--change", "ENV=GOTOOLCHAIN=local", "--change", "ENV=GOCACHE=/tmp/gocache",
			"--change", "ENV=HOME=/tmp", builder, "localhost/agentbot-build-base:test")
		runtime := filepath.Join(dir, "runtime.tar")
		writeTar(t, runtime, nil, []string{"tmp", "etc", "home/nonroot"}, map[string]string{
			"etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
			"etc/group":  "root:x:0:\nnonroot:x:65532:\n",
		})
		sh("import", runtime, "localhost/agentbot-runtime-base:test")
		build = append(build, "--build-arg", "BUILD_IMAGE=localhost/agentbot-build-base:test",
			"--build-arg", "RUNTIME_IMAGE=localhost/agentbot-runtime-base:test")
	}
	build = append(build, strings.Fields(os.Getenv("IMAGE_RUN_FLAGS"))...)
	sh(append(build, "-f", filepath.Join(root, "Dockerfile"), root)...)
	runArgs := []string{"run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp"}
	runArgs = append(runArgs, strings.Fields(os.Getenv("IMAGE_RUN_FLAGS"))...)
	if v := sh(append(runArgs, "localhost/agentbot:test", "version")...); !strings.Contains(v, "bot image-test") {
		t.Fatalf("version in the image: %q", v)
	}
	if u := sh("image", "inspect", "--format", "{{.Config.User}} {{json .Config.Volumes}} {{json .Config.Healthcheck}}", "localhost/agentbot:test"); !strings.Contains(u, "65532") ||
		!strings.Contains(u, "/data") || !strings.Contains(u, "healthcheck") {
		t.Fatalf("image config (user, volume, healthcheck): %s", u)
	}
	out := sh(append(runArgs, "localhost/agentbot:test", "demo")...)
	_, checks, ok := strings.Cut(out, "invariant checks:")
	if !ok || strings.Contains(checks, "✘") || !strings.Contains(checks, "✔") {
		t.Fatalf("demo in the image:\n%s", out)
	}
	t.Logf("demo in the image:\n%s", out)
}

func run1(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}

// writeTar writes a root filesystem tarball: trees copied from the host
// (dest -> source), empty directories, and small files.
func writeTar(t *testing.T, path string, trees map[string]string, dirs []string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, d := range dirs {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode}))
	}
	for name, body := range files {
		must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}))
		_, err := io.WriteString(tw, body)
		must(t, err)
	}
	for dest, src := range trees {
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			name := filepath.ToSlash(filepath.Join(dest, rel))
			info, err := d.Info()
			if err != nil {
				return err
			}
			link := ""
			if info.Mode()&fs.ModeSymlink != 0 {
				if link, err = os.Readlink(p); err != nil {
					return err
				}
			}
			h, err := tar.FileInfoHeader(info, link)
			if err != nil {
				return err
			}
			h.Name = name
			if d.IsDir() {
				h.Name += "/"
			}
			h.Mode |= 0o444 // the module cache is read-only; the build user reads it
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if info.Mode().IsRegular() {
				r, err := os.Open(p)
				if err != nil {
					return err
				}
				defer r.Close()
				_, err = io.Copy(tw, r)
				return err
			}
			return nil
		})
		must(t, err)
	}
	must(t, tw.Close())
	must(t, f.Close())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
