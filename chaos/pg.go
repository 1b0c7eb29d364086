package chaos

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"time"
)

// PG is the suite's own throw-away Postgres cluster (initdb + pg_ctl in a
// temp dir on a free loopback port), so the store-outage probe can stop and
// start it without touching any other database on the machine.
type PG struct {
	bin, dir, data string
	Port           int
	asPostgres     bool // initdb refuses root: run the cluster as the postgres user
}

// Postgres starts the cluster once per suite; Close stops and removes it.
func (s *Suite) Postgres() (*PG, error) {
	var err error
	s.pgOnce.Do(func() {
		s.pg, err = startPG()
		if err == nil {
			s.OnClose(s.pg.destroy)
		}
		s.pgErr = err
	})
	return s.pg, s.pgErr
}

func startPG() (*PG, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return nil, fmt.Errorf("initdb not found under /usr/lib/postgresql")
	}
	dir, err := os.MkdirTemp("", "voicesvc-chaos-pg-")
	if err != nil {
		return nil, err
	}
	os.Chmod(dir, 0o755)
	p := &PG{bin: filepath.Dir(matches[len(matches)-1]), dir: dir, data: filepath.Join(dir, "data"), asPostgres: os.Geteuid() == 0}
	if p.asPostgres {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		os.Chown(dir, uid, gid)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if out, err := p.run("initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, tail(string(out), 400))
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// run runs a cluster tool, as the postgres user when the suite is root.
func (p *PG) run(tool string, args ...string) ([]byte, error) {
	path := filepath.Join(p.bin, tool)
	var cmd *exec.Cmd
	if p.asPostgres {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = p.dir
	return cmd.CombinedOutput()
}

// Start starts the cluster and waits until it accepts connections.
func (p *PG) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", p.Port, p.dir)
	if out, err := p.run("pg_ctl", "-D", p.data, "-o", opts, "-l", filepath.Join(p.dir, "log"), "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %v: %s", err, tail(string(out), 400))
	}
	return nil
}

// Stop stops the cluster (mode fast: connections are cut at once).
func (p *PG) Stop() error {
	if out, err := p.run("pg_ctl", "-D", p.data, "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, tail(string(out), 400))
	}
	return nil
}

// NewDB creates a database and returns its URL.
func (p *PG) NewDB(name string) string {
	name = fmt.Sprintf("%s_%d", name, time.Now().UnixNano()%1e9)
	p.run("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "postgres", name)
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.Port, name)
}

func (p *PG) destroy() {
	p.run("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "-t", "30", "stop")
	os.RemoveAll(p.dir)
}
