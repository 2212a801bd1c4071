package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// Config configures Open.
type Config struct {
	// Path is the database file; it is created when missing (unless
	// ReadOnly).
	Path string
	// ReadOnly opens an existing store for reading only: no migration, no
	// recovery, no owner, and Observe returns ErrReadOnly. Nothing is
	// marked, but reads show what recovery would: a run or pair without a
	// terminal whose owner is gone is interrupted. A store on a location
	// this process cannot write (a read-only mount, another user's
	// directory, a full disk) is read as it is, even when SQLite cannot
	// make its shared-memory file there: as an immutable file when no
	// write-ahead log holds commits, else through a private copy of the
	// file and its log in the temporary directory, removed by Close.
	ReadOnly bool
	// BusyTimeout is how long a statement waits for a lock another process
	// holds. Default DefaultBusyTimeout.
	BusyTimeout time.Duration
}

const (
	// DefaultBusyTimeout is Config.BusyTimeout's default.
	DefaultBusyTimeout = 5 * time.Second
	// MaxBusyTimeout bounds Config.BusyTimeout.
	MaxBusyTimeout = 10 * time.Minute

	// readers is how many connections serve reads beside the writer's.
	readers = 4
)

// Durability is the durability setting of the writer connection, read back
// from SQLite.
type Durability struct {
	JournalMode string // "wal"
	Synchronous string // "FULL": the WAL is synced at every commit
}

// Store is an open store. It is safe for concurrent use; Observe may be
// called from many logs at once.
type Store struct {
	db       *sql.DB
	w        *writer // nil when read-only
	recovery Recovery
	owner    *owner // this open's ownership; nil when read-only
	ownerDir string // where every owner's lock file is

	copyDir string // the private copy a read-only open reads, if any

	mu     sync.RWMutex // held for reading while an event is handed to w
	closed bool
}

// Open opens the store at path for writing, creating or migrating it, and
// recovers what an earlier process left unfinished.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenConfig(ctx, Config{Path: path})
}

// OpenConfig opens a store as cfg says. A writable open migrates the schema
// to SchemaVersion and runs recovery (see Recovery); a file with a newer
// schema is a *VersionError, a file some other program made is
// ErrNotStore, and a file whose header or pages are damaged matches
// ErrDamaged.
//
// Many processes may open a store for writing at once. Each writable open
// is an owner (owner.go) and stamps the logs it starts; recovery marks a
// run or pair without a terminal as interrupted only when its owner is
// gone, never one that another open is still recording. A terminal
// recorded later still wins.
func OpenConfig(ctx context.Context, cfg Config) (*Store, error) {
	return openConfig(ctx, cfg, hooks{})
}

// openConfig is OpenConfig with the writer's test hooks h, which are in
// place before the writer's goroutine starts.
func openConfig(ctx context.Context, cfg Config, h hooks) (*Store, error) {
	if cfg.Path == "" {
		return nil, bound.Missing("store.path")
	}
	if cfg.BusyTimeout < 0 || cfg.BusyTimeout > MaxBusyTimeout {
		return nil, bound.Malformedf("store.busy_timeout", "must be between 0 and 10m")
	}
	if cfg.BusyTimeout == 0 {
		cfg.BusyTimeout = DefaultBusyTimeout
	}
	db, err := sql.Open("sqlite", dsn(cfg))
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	db.SetMaxOpenConns(readers + 1)
	db.SetMaxIdleConns(readers + 1)
	s := &Store{db: db, ownerDir: ownerDir(cfg.Path)}
	if err := s.init(ctx, cfg, h); err != nil {
		if s.w != nil {
			s.w.abandon()
		}
		s.release()
		db.Close()
		s.db.Close() // a fallback's, when init replaced db
		s.removeCopy()
		return nil, err
	}
	return s, nil
}

func (s *Store) init(ctx context.Context, cfg Config, h hooks) error {
	if cfg.ReadOnly {
		app, version, empty, err := header(ctx, s.db)
		if err != nil && !hasWAL(cfg.Path) {
			// SQLite reads a WAL store through a shared-memory file beside
			// it, which it cannot create on a location it cannot write.
			// Without a WAL file no process has the store open for
			// writing and every committed page is in the main file, which
			// can then be read as an immutable file.
			if db, derr := sql.Open("sqlite", dsn(cfg)+"&immutable=1"); derr == nil {
				db.SetMaxOpenConns(readers + 1)
				db.SetMaxIdleConns(readers + 1)
				if app, version, empty, derr = header(ctx, db); derr == nil {
					s.db.Close()
					s.db, err = db, nil
				} else {
					db.Close()
				}
			}
		}
		if err != nil && hasWAL(cfg.Path) {
			// A log with commits needs a shared-memory file to be read,
			// which a full or read-only location cannot hold: read a
			// private copy instead. No process is writing the store, or
			// the file would be there.
			var derr error
			if app, version, empty, derr = s.readCopy(ctx, cfg); derr == nil {
				err = nil
			}
		}
		if err != nil {
			return openError(err)
		}
		return checkHeader(app, version, empty, false)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return openError(err)
	}
	s.w = &writer{conn: conn, hooks: h}
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return openError(err)
	}
	if mode != "wal" {
		return errors.New("store: open: the database could not be put in WAL mode")
	}
	if err := migrate(ctx, conn); err != nil {
		if errors.Is(err, ErrNotStore) || errors.Is(err, ErrDamaged) || errors.As(err, new(*VersionError)) {
			return err
		}
		return openError(err)
	}
	if err := s.register(ctx, conn, cfg.Path); err != nil {
		return openError(err)
	}
	if s.recovery, err = s.recoverOpen(ctx, conn); err != nil {
		return fmt.Errorf("store: recovery: %w", err)
	}
	return s.w.start(ctx)
}

// SQLite's primary result codes for a file it cannot read as a database.
const (
	sqliteError   = 1  // SQLITE_ERROR
	sqliteCorrupt = 11 // SQLITE_CORRUPT
	sqliteNotADB  = 26 // SQLITE_NOTADB
)

// openError wraps an error of opening the store: one that says the file is
// damaged also matches ErrDamaged, so that a caller need not know SQLite's
// codes.
func openError(err error) error {
	var se interface{ Code() int }
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		// A schema format number above 4 is SQLITE_ERROR with only this
		// text to tell it apart.
		if c == sqliteCorrupt || c == sqliteNotADB ||
			c == sqliteError && strings.Contains(err.Error(), "unsupported file format") {
			return fmt.Errorf("%w: %w", ErrDamaged, err)
		}
	}
	return fmt.Errorf("store: open: %w", err)
}

// dsn builds the driver's name for cfg: a SQLite URI, so that mode=ro
// reaches SQLite, with the driver's pragma parameters. Every connection of
// the pool gets the pragmas.
func dsn(cfg Config) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10)+")")
	if cfg.ReadOnly {
		q.Add("mode", "ro")
	} else {
		// page_size takes effect only on a new, empty file, and only
		// before it enters WAL mode: the driver runs the _journal_mode key
		// after every _pragma.
		q.Add("_pragma", "page_size("+strconv.Itoa(pageSize)+")")
		q.Add("_journal_mode", "WAL")
		q.Add("_pragma", "synchronous(FULL)")
	}
	// A URI path escapes only what would end or change it.
	path := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(cfg.Path)
	return "file:" + path + "?" + q.Encode()
}

// Close stops accepting events, waits for the events already handed to the
// writer to be committed (and their callers answered), and closes the
// database. Later calls return nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	var err error
	if s.w != nil {
		err = s.w.stop()
	}
	s.release()
	err = errors.Join(err, s.db.Close())
	s.removeCopy()
	return err
}

// Recovery returns what this open found unfinished. It is empty for a
// read-only open.
func (s *Store) Recovery() Recovery { return s.recovery.clone() }

// Durability reads the journal mode and the synchronous setting back from
// the writer's connection: the setting every acknowledgement relies on.
func (s *Store) Durability(ctx context.Context) (Durability, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return Durability{}, ErrClosed
	}
	if s.w == nil {
		return Durability{}, ErrReadOnly
	}
	var d Durability
	var sync int
	if err := s.w.conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&d.JournalMode); err != nil {
		return Durability{}, err
	}
	if err := s.w.conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return Durability{}, err
	}
	d.Synchronous = [...]string{"OFF", "NORMAL", "FULL", "EXTRA"}[min(max(sync, 0), 3)]
	return d, nil
}

// readCopy copies the store at cfg.Path and its write-ahead log into a
// new private directory, opens the copy read-only in place of s.db, and
// reads its header. Close removes the copy.
func (s *Store) readCopy(ctx context.Context, cfg Config) (app, version int, empty bool, err error) {
	dir, err := os.MkdirTemp("", "spice-orch-store-")
	if err != nil {
		return 0, 0, false, err
	}
	path := filepath.Join(dir, "store.db")
	// The log is copied last: a commit it holds is never lost, and the
	// main file cannot have changed, since no writer has the store open.
	for _, suffix := range []string{"", "-wal"} {
		if err = copyFile(cfg.Path+suffix, path+suffix); err != nil {
			os.RemoveAll(dir)
			return 0, 0, false, err
		}
	}
	ccfg := cfg
	ccfg.Path = path
	db, err := sql.Open("sqlite", dsn(ccfg))
	if err == nil {
		db.SetMaxOpenConns(readers + 1)
		db.SetMaxIdleConns(readers + 1)
		app, version, empty, err = header(ctx, db)
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return 0, 0, false, err
	}
	s.db.Close()
	s.db, s.copyDir = db, dir
	return app, version, empty, nil
}

func (s *Store) removeCopy() {
	if s.copyDir != "" {
		_ = os.RemoveAll(s.copyDir)
		s.copyDir = ""
	}
}

// copyFile copies the file at from to a new file at to.
func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}

// hasWAL reports whether the store at path has a write-ahead log with
// anything in it (or one this process cannot look at).
func hasWAL(path string) bool {
	fi, err := os.Stat(path + "-wal")
	return err == nil && fi.Size() > 0 || err != nil && !errors.Is(err, os.ErrNotExist)
}
