package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// pgCluster is a throw-away Postgres cluster of one test: its own data
// directory under a temporary directory, its own port, started and stopped
// with pg_ctl. Tests stop and start it to play an outage; it is stopped and
// removed when the test ends. Only this cluster's postmaster is ever
// signalled (pg_ctl -D names it).
type pgCluster struct {
	t    *testing.T
	bin  string // /usr/lib/postgresql/N/bin
	dir  string
	data string
	port int
	run  []string // prefix that runs a command as the postgres user when we are root
}

// newPGCluster initdbs and starts a cluster, or skips when the Postgres
// server binaries are not installed.
func newPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("no initdb under /usr/lib/postgresql/*/bin: the outage test needs the Postgres server binaries")
	}
	c := &pgCluster{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	dir, err := os.MkdirTemp("", "voicesvc-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir, c.data = dir, filepath.Join(dir, "data")
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: run the cluster as postgres.
		pg, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			t.Skipf("running as root and no postgres user to run the cluster as: %v", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.run = []string{"runuser", "-u", "postgres", "--"}
	}
	t.Cleanup(func() {
		c.pgctl("stop", "-m", "immediate") // may already be stopped
		os.RemoveAll(c.dir)
	})
	c.port = freePort(t)
	if out, err := c.cmd(filepath.Join(c.bin, "initdb"), "-D", c.data, "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.start()
	return c
}

// DSN of the cluster's postgres database.
func (c *pgCluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *pgCluster) start() {
	c.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50", c.port, c.dir)
	if out, err := c.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(c.dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		c.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// stop shuts the cluster down the way an operator's fast shutdown does:
// open connections are terminated.
func (c *pgCluster) stop() {
	c.t.Helper()
	if out, err := c.pgctl("stop", "-w", "-m", "fast"); err != nil {
		c.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

func (c *pgCluster) pgctl(args ...string) ([]byte, error) {
	return c.cmd(filepath.Join(c.bin, "pg_ctl"), append([]string{"-D", c.data}, args...)...).CombinedOutput()
}

func (c *pgCluster) cmd(name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, c.run...), name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.dir
	return cmd
}

// freePort is a loopback port nobody listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
