// Package tools owns the compiled tools a host wires into a plan: fs.read
// and fs.write on a workspace directory, and text.stats. Each implements
// tool.Tool with honest effect metadata (K4):
//
//	fs.read     read-only, replay safe,       capability fs.read
//	fs.write    mutating,  replay idempotent, capability fs.write
//	text.stats  read-only, replay safe,       no capability
//
// Arguments are decoded strictly against each tool's JSON schema (unknown
// fields, duplicate fields, wrong types, missing required fields and
// trailing data are refused). Mistakes the model can correct come back as
// model-visible problem results (K7) with a stable code: invalid_arguments,
// path_outside_workspace, not_found, not_a_file, not_a_directory, too_large,
// not_text. Infrastructure failures are execution errors: definitive when
// nothing was changed, uncertain when a write may have taken effect.
//
// # Workspace confinement
//
// Paths are relative, slash-separated and confined to the workspace root
// given at construction, which is resolved (absolute, symbolic links
// evaluated) once. Absolute paths and paths whose ".." elements leave the
// root are refused lexically; ".." that stays inside is resolved lexically
// ("a/../b" is "b"). The existing part of a path is then resolved with
// filepath.EvalSymlinks and must stay under the resolved root, so a
// symbolic link inside the workspace that points outside is refused, for
// files and directories alike. The I/O itself goes through an os.Root, which
// refuses to leave the root even if a link is swapped in after the check.
// A hard link cannot be resolved to a place, so on unix fs.read refuses a
// file with more than one link (path_outside_workspace), even when every
// name is inside the workspace; fs.write replaces a file by renaming a new
// one over it, which never writes through a hard link to the file's other
// names.
//
// fs.write replaces the whole file atomically: it writes a temporary file in
// the target's directory, syncs it, renames it over the target and syncs the
// directory. A reader sees the old content or the new, never a mix, and a
// failed write leaves no temporary file behind.
//
// A call whose context carries an idempotency key (package idempotency)
// that fs.write already wrote under is a no-op returning the first result;
// Config.Journal keeps those keys across processes.
//
// This package must not import any provider, another adapter, or anything
// above the kernel but the idempotency key; it knows nothing about models
// or runs.
package tools
