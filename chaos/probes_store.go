package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver, to hold the server's file locked
)

// Probes of a store that hangs rather than goes away (issue 26 item 4): a
// Postgres stopped with SIGSTOP, a SQLite file another process holds under
// BEGIN EXCLUSIVE. Every answer meanwhile is a success or 503
// store_unavailable with Retry-After, never a 500, within the server's
// --store-timeout; service comes back by itself.

// hangStoreTimeout is the --store-timeout of the servers these probes start:
// short, so that the hang yields many answers.
const hangStoreTimeout = 2 * time.Second

// storeLoad runs the request mix of store-down with workers clients until
// stop is closed, classing every answer: those of requests that overlapped
// the hang (hung reports whether it was on at the start or at the end of
// the request) and the others.
type storeLoad struct {
	mu      sync.Mutex
	during  map[string]int
	other   map[string]int
	badRA   int
	slowest time.Duration
	slowReq string
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startStoreLoad(e *Env, workers int, hung func() bool) *storeLoad {
	l := &storeLoad{during: map[string]int{}, other: map[string]int{}, stop: make(chan struct{})}
	names, reqs := storeRequests(e, &http.Client{Timeout: 15 * time.Second})
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				before, start := hung(), time.Now()
				k := (w + i) % len(reqs)
				r := reqs[k]()
				took := time.Since(start)
				after := hung()
				l.mu.Lock()
				if before || after {
					l.during[r.Outcome()]++
					if took > l.slowest {
						l.slowest, l.slowReq = took, names[k]+" "+r.Outcome()
					}
					if r.Status == 503 && r.Header.Get("Retry-After") != "1" {
						l.badRA++
					}
				} else if r.Status >= 500 || r.Status == 0 {
					l.other[r.Outcome()]++
				}
				l.mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return l
}

// storeRequests is the request mix of the store probes, each with its
// name: a speak, a voice read, a token minted (a write), a voice listing.
func storeRequests(e *Env, c *http.Client) ([]string, []func() *Resp) {
	srv := e.Srv
	return []string{"speak", "get voice", "create token", "list voices"}, []func() *Resp{
		func() *Resp {
			return CallWith(c, "POST", srv.API+"/voices/"+e.Voice+"/speak", map[string]any{"text": "Hi.", "output_format": "s16le"}, "X-API-Key", e.Key)
		},
		func() *Resp { return CallWith(c, "GET", srv.API+"/voices/"+e.Voice, nil, "X-API-Key", e.Key) },
		func() *Resp {
			return CallWith(c, "POST", srv.API+"/tokens", map[string]any{"ttl_seconds": 60}, "X-API-Key", e.Key)
		},
		func() *Resp { return CallWith(c, "GET", srv.API+"/voices?page_size=5", nil, "X-API-Key", e.Key) },
	}
}

func (l *storeLoad) finish() {
	close(l.stop)
	l.wg.Wait()
}

// verdict: during the hang only successes and 503 store_unavailable (with
// Retry-After 1, at least one of them, none slower than the store timeout
// plus a margin); nothing 5xx outside it; recovered.
func (l *storeLoad) verdict(recovered bool) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := recovered && l.badRA == 0 && l.during["503 store_unavailable"] > 0 && len(l.other) == 0 &&
		l.slowest <= hangStoreTimeout+3*time.Second
	for k := range l.during {
		if !strings.HasPrefix(k, "2") && k != "503 store_unavailable" {
			ok = false
		}
	}
	return fmt.Sprintf("during the hang %s (Retry-After != 1: %d, slowest %v: %s); 5xx or dropped outside it %s; recovered=%v",
		counts(l.during), l.badRA, l.slowest.Round(time.Millisecond), l.slowReq, counts(l.other), recovered), ok
}

// probeStoreHangPostgres: the suite's own Postgres cluster is stopped with
// SIGSTOP (postmaster and every backend) for 5 s under load, then SIGCONT.
func probeStoreHangPostgres(ctx context.Context, s *Suite) (string, bool) {
	pg, err := s.Postgres()
	if err != nil {
		return "no Postgres: " + err.Error(), false
	}
	return hangUnderLoad(s, "pg-hang", pg.NewDB("hang"), func(string) (string, func() error, error) {
		pids, err := pg.Signal(syscall.SIGSTOP)
		if err != nil {
			pg.Signal(syscall.SIGCONT)
			return "", nil, fmt.Errorf("SIGSTOP: %w", err)
		}
		time.Sleep(5 * time.Second)
		return fmt.Sprintf("%d processes stopped 5s; ", pids), func() error {
			if _, err := pg.Signal(syscall.SIGCONT); err != nil {
				return fmt.Errorf("SIGCONT: %w", err)
			}
			return nil
		}, nil
	})
}

// sqliteHold is how long store-lock-sqlite holds the file: longer than the
// 5 s busy_timeout the server had before --store-timeout, so that a
// SQLITE_BUSY surfaces.
const sqliteHold = 7 * time.Second

// probeStoreLockSQLite: another process (this one, with a connection of its
// own) holds the server's SQLite file under BEGIN EXCLUSIVE for sqliteHold
// under load. Writes cannot happen; reads may (WAL).
func probeStoreLockSQLite(ctx context.Context, s *Suite) (string, bool) {
	return hangUnderLoad(s, "sqlite-lock", "", func(db string) (string, func() error, error) {
		lock, err := lockSQLite(ctx, db)
		if err != nil {
			return "", nil, err
		}
		time.Sleep(sqliteHold)
		return "", lock.release, nil
	})
}

// hangUnderLoad runs a store-hang probe: a server on db ("" for its own
// SQLite file) with a short --store-timeout under the store load, then
// hang, which makes its store hang (given the server's DB), holds it, and
// returns what it did and how to end it. The hang lasts until the server
// answers again; a second of load follows. Every answer during it must be
// 2xx or 503 store_unavailable (startStoreLoad's verdict).
func hangUnderLoad(s *Suite, name, db string, hang func(db string) (string, func() error, error)) (string, bool) {
	srv, err := s.StartServer(name, ServerOpts{DB: db,
		Args: []string{"--engine", "reference", "--reference-rtf", "0", "--engine-workers", "0",
			"--store-timeout", hangStoreTimeout.String()}})
	if err != nil {
		return err.Error(), false
	}
	defer srv.Stop()
	e, err := s.NewEnv(srv, "enterprise", "--billing", "meter", "--rps", "0", "--concurrency", "100")
	if err != nil {
		return err.Error(), false
	}
	var hung atomic.Bool
	load := startStoreLoad(e, 8, hung.Load)
	time.Sleep(2 * time.Second)

	hung.Store(true)
	what, end, err := hang(srv.DB)
	if err != nil {
		load.finish()
		return err.Error(), false
	}
	endErr := end()
	recovered := waitFor(30*time.Second, func() bool { return e.Speak("Back.").Status == 200 })
	hung.Store(false)
	time.Sleep(time.Second) // a second of load after the recovery
	load.finish()
	if endErr != nil {
		return endErr.Error(), false
	}
	out, ok := load.verdict(recovered && srv.Alive())
	return what + out, ok
}

// sqliteLock is a SQLite store held under BEGIN EXCLUSIVE by a connection
// of this process: to the server, another process holds its file.
type sqliteLock struct {
	db   *sql.DB
	conn *sql.Conn
}

// lockSQLite takes the exclusive lock on the store at dbURL
// (sqlite://PATH), waiting up to 10 s for the server's own transactions.
func lockSQLite(ctx context.Context, dbURL string) (*sqliteLock, error) {
	db, err := sql.Open("sqlite", strings.TrimPrefix(dbURL, "sqlite://")+"?_busy_timeout=10000")
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err == nil {
		_, err = conn.ExecContext(ctx, "BEGIN EXCLUSIVE")
		if err != nil {
			conn.Close()
			err = fmt.Errorf("BEGIN EXCLUSIVE: %w", err)
		}
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &sqliteLock{db: db, conn: conn}, nil
}

// release rolls the transaction back, which frees the file, and closes.
func (l *sqliteLock) release() error {
	_, err := l.conn.ExecContext(context.Background(), "ROLLBACK")
	l.conn.Close()
	l.db.Close()
	if err != nil {
		return fmt.Errorf("ROLLBACK: %w", err)
	}
	return nil
}

// Signal sends sig to the cluster's postmaster and every process it
// started (backends, background workers), and returns how many. SIGSTOP
// of them all is a server that hangs: connections stay open, nothing
// answers.
func (p *PG) Signal(sig syscall.Signal) (int, error) {
	b, err := os.ReadFile(filepath.Join(p.data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %q", first)
	}
	pids := []int{pm}
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if parentOf(pid) == pm {
			pids = append(pids, pid)
		}
	}
	// The postmaster first on SIGSTOP (it would start new backends), last
	// on SIGCONT.
	if sig == syscall.SIGCONT {
		pids = append(pids[1:], pm)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
			return 0, fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	return len(pids), nil
}

// parentOf reads the parent pid of pid from /proc (0 when gone).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
