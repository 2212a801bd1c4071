//go:build linux

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// mount mounts source (of type fstype) over dir until the test ends,
// skipping the test where it cannot (only root can).
func mount(t *testing.T, source, dir, fstype, data string, flags uintptr) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if err := syscall.Mount(source, dir, fstype, flags, data); err != nil {
		t.Skipf("cannot mount %s on %s: %v", fstype, dir, err)
	}
	t.Cleanup(func() { require.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH)) })
}

// killedMidCall leaves a pair in db whose process was killed while its
// first mutating call ran, and returns the pair ID.
func killedMidCall(t *testing.T, e []string, db string) string {
	t.Helper()
	held := false
	wait := started(t, append(e, "SPICE_ORCH_PAUSE_AFTER=tool.started"), func(cmd *exec.Cmd, line string) {
		if strings.Contains(line, "holding the pair after event") && !held {
			held = true
			require.NoError(t, cmd.Process.Kill())
		}
	}, "run", "--json", "--store", db)
	r := wait()
	require.True(t, held, r.stderr)
	return field[string](t, timelineHead(t, r.stdout).Payload, "pair_id")
}

// After the disk filled up, `runs list` and `runs show` still read the
// store, and show the killed pair interrupted and its call uncertain, with
// and without --read-only.
func TestRunsReadAStoreOnAFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mount(t, "tmpfs", dir, "tmpfs", "size=16m", 0)
	readFullDisk(t, dir)
}

// On a real ext4 file system on a loop device, filled after the store was
// closed, SQLite can create the shared-memory file but not allocate its
// pages: the store is still read, with and without --read-only.
func TestRunsReadAStoreOnAFullExt4Disk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mountExt4(t, dir, 16<<20)
	db := filepath.Join(dir, "runs.db")
	e := env(t)
	r := spiceOrch(t, e, "run", "--json", "--store", db)
	require.Equal(t, 0, r.code, r.stderr)
	pairID := checkBuiltinPair(t, r.stdout)
	fillUp(t, dir)
	for _, ro := range [][]string{nil, {"--read-only"}} {
		list := spiceOrch(t, e, append([]string{"runs", "list", "--store", db}, ro...)...)
		require.Equal(t, 0, list.code, list.stderr)
		require.Regexp(t, `(?m)^`+pairID+`\s+completed\s+approved`, list.stdout)
		replay := spiceOrch(t, e, append([]string{"runs", "replay", pairID, "--json", "--store", db}, ro...)...)
		require.Equal(t, 0, replay.code, replay.stderr)
		require.Equal(t, r.stdout, replay.stdout)
	}
}

// fillUp writes to a file in dir until its file system is full.
func fillUp(t *testing.T, dir string) {
	t.Helper()
	fill, err := os.Create(filepath.Join(dir, "fill"))
	require.NoError(t, err)
	chunk := make([]byte, 1<<20)
	for i := 0; ; i++ {
		require.Less(t, i, 64, "the 16 MiB disk never filled")
		if _, err := fill.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), err)
			break
		}
	}
	require.NoError(t, fill.Close())
}

// mountExt4 makes an ext4 file system of size bytes in a file, with no
// blocks reserved for root (so that full is full for every user), and mounts
// it over dir through a loop device until the test ends, skipping the
// test where the machine does not allow it.
func mountExt4(t *testing.T, dir string, size int64) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skip("no mkfs.ext4")
	}
	img := filepath.Join(t.TempDir(), "ext4.img")
	f, err := os.Create(img)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())
	if out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a loop device: %v: %s", err, out)
	}
	t.Cleanup(func() {
		out, err := exec.Command("umount", "-d", dir).CombinedOutput()
		require.NoError(t, err, "%s", out)
	})
}

// readFullDisk records a killed pair in a store in dir, fills dir's file
// system, and reads the store with and without --read-only.
func readFullDisk(t *testing.T, dir string) {
	t.Helper()
	db := filepath.Join(dir, "runs.db")
	e := env(t)
	pairID := killedMidCall(t, e, db)
	fillUp(t, dir)

	for _, ro := range [][]string{nil, {"--read-only"}} {
		list := spiceOrch(t, e, append([]string{"runs", "list", "--store", db}, ro...)...)
		require.Equal(t, 0, list.code, list.stderr)
		require.Regexp(t, `(?m)^`+pairID+`\s+interrupted\s`, list.stdout)
		if ro == nil {
			require.Contains(t, list.stderr, "reading the store read-only: it cannot be opened for writing")
		}
		show := spiceOrch(t, e, append([]string{"runs", "show", pairID, "--store", db}, ro...)...)
		require.Equal(t, 0, show.code, show.stderr)
		require.Contains(t, show.stdout, "status    interrupted")
		require.Contains(t, show.stdout, "no outcome recorded")
	}
}

// A store on a read-only location reads with --read-only, and without it.
func TestRunsReadAStoreOnAReadOnlyLocation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	e := env(t)
	r := spiceOrch(t, e, "run", "--json", "--store", db)
	require.Equal(t, 0, r.code, r.stderr)
	pairID := checkBuiltinPair(t, r.stdout)
	mount(t, dir, dir, "", "", syscall.MS_BIND)
	require.NoError(t, syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""))

	for _, ro := range [][]string{nil, {"--read-only"}} {
		list := spiceOrch(t, e, append([]string{"runs", "list", "--store", db}, ro...)...)
		require.Equal(t, 0, list.code, list.stderr)
		require.Regexp(t, `(?m)^`+pairID+`\s+completed\s+approved`, list.stdout)
		replay := spiceOrch(t, e, append([]string{"runs", "replay", pairID, "--json", "--store", db}, ro...)...)
		require.Equal(t, 0, replay.code, replay.stderr)
		require.Equal(t, r.stdout, replay.stdout)
	}
}

// A store whose writer was killed (its write-ahead log holds commits) and
// whose shared-memory file is gone cannot get a new one on a full or
// read-only location; the store is still read, commits in the log
// included.
func TestRunsReadAKilledStoreWhoseSharedMemoryCannotBeMade(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	e := env(t)
	pairID := killedMidCall(t, e, db)
	fi, err := os.Stat(db + "-wal")
	require.NoError(t, err)
	require.NotZero(t, fi.Size(), "the killed writer's log holds its commits")
	require.NoError(t, os.Remove(db+"-shm"))
	mount(t, dir, dir, "", "", syscall.MS_BIND)
	require.NoError(t, syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""))

	for _, ro := range [][]string{nil, {"--read-only"}} {
		list := spiceOrch(t, e, append([]string{"runs", "list", "--store", db}, ro...)...)
		require.Equal(t, 0, list.code, list.stderr)
		require.Regexp(t, `(?m)^`+pairID+`\s+interrupted\s`, list.stdout)
	}
}
