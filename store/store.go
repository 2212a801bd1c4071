package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
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
	// recovery, and Observe returns ErrReadOnly. Statuses are as recorded:
	// a run without a terminal shows as running until a writable open
	// marks it interrupted.
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
// schema is a *VersionError, a file some other program made is ErrNotStore.
//
// One process at a time should open a store for writing: recovery marks
// every run and pair that has no terminal as interrupted, which is only
// true when no other process is still writing them. A terminal recorded
// later still wins.
func OpenConfig(ctx context.Context, cfg Config) (*Store, error) {
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
	s := &Store{db: db}
	if err := s.init(ctx, cfg); err != nil {
		if s.w != nil {
			s.w.abandon()
		}
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) init(ctx context.Context, cfg Config) error {
	if cfg.ReadOnly {
		app, version, empty, err := header(ctx, s.db)
		if err != nil {
			return fmt.Errorf("store: open: %w", err)
		}
		return checkHeader(app, version, empty, false)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: open: %w", err)
	}
	s.w = &writer{conn: conn}
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("store: open: %w", err)
	}
	if mode != "wal" {
		return errors.New("store: open: the database could not be put in WAL mode")
	}
	if err := migrate(ctx, conn); err != nil {
		if errors.Is(err, ErrNotStore) || errors.As(err, new(*VersionError)) {
			return err
		}
		return fmt.Errorf("store: open: %w", err)
	}
	if s.recovery, err = recoverOpen(ctx, conn); err != nil {
		return fmt.Errorf("store: recovery: %w", err)
	}
	return s.w.start(ctx)
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
	return errors.Join(err, s.db.Close())
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
