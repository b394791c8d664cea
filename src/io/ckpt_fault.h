/* src/io/ckpt_fault.h - internal: the checkpoint store's fault-injection
 * hook, for the tests (tests/io) only; not part of dtrain/ckpt.h's contract.
 * ckpt_commit.c and ckpt_rankfile.c (which holds it) call the hook before
 * each step. */
#ifndef DT_IO_CKPT_FAULT_H
#define DT_IO_CKPT_FAULT_H

/* The hook is called before each file-system step
 * with its name: "shard_write" (after the rank file was created, before its
 * data), "shard_sync" (data written, before fsync), "manifest_write",
 * "manifest_sync" (before the fsyncs of manifest.json.tmp and DIR),
 * "rename_manifest", "remove_old". Return 0 to proceed, DT_CKPT_FAULT_FAIL to
 * make the step fail (the function cleans up as for a real error), or
 * DT_CKPT_FAULT_CRASH to stop right there with DT_ERR_IO and no cleanup (what
 * a killed process leaves behind). NULL removes the hook. Process-wide, not
 * thread-safe. */
#define DT_CKPT_FAULT_FAIL 1
#define DT_CKPT_FAULT_CRASH 2
typedef int (*dt_ckpt_fault_fn)(const char *step, void *arg);
void dt_ckpt_set_fault_hook(dt_ckpt_fault_fn fn, void *arg);

#endif
