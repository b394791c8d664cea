/* src/comm/registry.h - internal: the communicators of this process by
 * creation index (cid): names and members (world ranks), for messages and
 * for the watchdog. Every rank creates every communicator (creation is
 * collective over the world, in the same order everywhere), so a cid names
 * the same rank_list on every rank; the registry keeps the whole rank_list,
 * so it can tell the group (members, name) of ANY world rank in it, not only
 * this rank's. Read by the watchdog's thread too, so it keeps its own lock. */
#ifndef DT_COMM_REGISTRY_H
#define DT_COMM_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

/* key: the canonical rank_list ("[[0,1],[2,3]]"), NULL for the world (every
 * rank of world_size); my_group: this rank's group (-1: none); members: this
 * rank's group (its fallback when the key cannot be read). */
void dt_reg_add(uint32_t cid, const char *key, int world_size, int my_group, const int *members, int n);
/* Name of communicator `cid` as this rank sees it ("world", "[[0,1],[2,3]]
 * group 0", "[[0,1]] (no group)", "comm#7"). */
const char *dt_reg_name(uint32_t cid, char *buf, size_t cap);
/* The same as seen by world rank `world_rank` (its own group). */
const char *dt_reg_name_of(uint32_t cid, int world_rank, char *buf, size_t cap);
/* Members of this rank's group of cid into out (at most cap); the count, 0
 * if unknown. */
int dt_reg_members(uint32_t cid, int *out, int cap);
/* Members of world_rank's group of cid (itself alone when it is in no
 * group); the count, 0 if cid is unknown. */
int dt_reg_members_of(uint32_t cid, int world_rank, int *out, int cap);
/* Forget cid (a released communicator). */
void dt_reg_remove(uint32_t cid);
void dt_reg_clear(void);

#endif
